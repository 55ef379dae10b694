import { describe, expect, it } from 'vitest';
import {
  buildFirstUserMessage,
  buildSystemPrompt,
  DEFAULT_HARNESS_RULES,
} from '../../../src/agent/prompt.js';

const input = {
  rules: [
    {
      name: 'max_discount',
      value: 30,
      unit: '%',
      source: 'pricing-policy-2024.pdf',
      description: 'largest discount on an order',
    },
    { name: 'free_shipping', value: true },
  ],
  editableFiles: ['src/pricing/**', 'src/cart.ts'],
  testCommands: ['npm test'],
  catalogPathInSandbox: '/catalog/service.yaml',
};

describe('buildSystemPrompt', () => {
  it('lists catalog rules with their sources, marked as prevailing over the code', () => {
    const prompt = buildSystemPrompt(input);
    expect(prompt).toContain('## Business rules (PREVAILING)');
    expect(prompt).toMatch(/PREVAIL over values found in code/);
    expect(prompt).toContain(
      '- max_discount = 30 % — largest discount on an order (source: pricing-policy-2024.pdf)',
    );
    expect(prompt).toContain('- free_shipping = true (source: the service catalog)');
    expect(prompt).toContain('/catalog/service.yaml');
  });

  it('lists the editable files and the test commands, after the harness rules', () => {
    const prompt = buildSystemPrompt(input);
    expect(prompt.startsWith(DEFAULT_HARNESS_RULES)).toBe(true);
    expect(prompt).toContain('## Files you may change\n- src/pricing/**\n- src/cart.ts');
    expect(prompt).toContain('- npm test');
  });

  it("adds the repo's AGENTS.md last, below the rules that win over it", () => {
    const prompt = buildSystemPrompt({ ...input, harnessRules: 'HARNESS', repoAgentsMd: 'Use tabs.' });
    expect(prompt.startsWith('HARNESS')).toBe(true);
    expect(prompt.indexOf('Use tabs.')).toBeGreaterThan(prompt.indexOf('PREVAILING'));
    expect(prompt).toMatch(/Where it conflicts with the rules above, the rules above win/);
    expect(buildSystemPrompt(input)).not.toContain('AGENTS.md');
  });

  it('says the workspace is a git repository only when it is one, and that test output is not the change', () => {
    expect(buildSystemPrompt({ ...input, workspaceGit: true })).toMatch(/`git status` and `git diff`/);
    expect(buildSystemPrompt(input)).not.toMatch(/git status/);
    expect(buildSystemPrompt(input)).toMatch(/What the tests and builds write .* is not part of your change/);
  });
});

describe('buildFirstUserMessage', () => {
  it('states the ticket', () => {
    expect(
      buildFirstUserMessage({
        ticket: { id: 'SHOP-12', title: 'Discount too high', body: 'Orders get 40% off.' },
      }),
    ).toBe('# Ticket SHOP-12 — Discount too high\n\nOrders get 40% off.\n');
  });

  it("adds the previous attempt's feedback", () => {
    const message = buildFirstUserMessage({
      ticket: { body: 'Fix it.' },
      feedback: 'FAIL src/cart.test.ts\nexpected 30 got 40',
    });
    expect(message).toMatch(/## Feedback from the previous attempt[\s\S]*expected 30 got 40/);
    expect(buildFirstUserMessage({ ticket: { body: 'Fix it.' } })).not.toMatch(/Feedback/);
  });
});
