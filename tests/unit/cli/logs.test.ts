/**
 * What a person sees of a tool call: its error text on the progress line and in `logs`, the
 * command a long `run_command` is running, and with `logs --verbose` the whole conversation.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { logsCommand } from '../../../src/cli/commands/logs.js';
import { CONVERSATION_ITEM_CHARS, formatConversation } from '../../../src/cli/conversation-text.js';
import { toolStartDetail } from '../../../src/fix/progress.js';
import { fixingTurns, memoryRun, type MemoryRun } from '../../helpers/memory-run.js';
import { capturedContext } from '../../helpers/cli.js';
import { text, toolUse } from '../agent/helpers.js';

const runs: MemoryRun[] = [];
afterEach(async () => {
  await Promise.all(runs.splice(0).map((r) => r.remove()));
});

const LONG = `echo ${'x'.repeat(CONVERSATION_ITEM_CHARS + 500)}`;
const turns = [
  {
    content: [
      text('Let me look at the threshold first.'),
      toolUse('m1', 'edit_file', {
        path: 'src/shipping.ts',
        search: 'NOT THERE \u001b[2J',
        replacement: 'x',
      }),
    ],
  },
  { content: [toolUse('c1', 'run_command', { command: 'npm test' })] },
  { content: [toolUse('c2', 'run_command', { command: LONG })] },
  ...fixingTurns,
];

async function runWithErrors(details: string[]): Promise<MemoryRun> {
  const run = await memoryRun({
    turns,
    overrides: {
      progress: { phase: () => undefined, detail: (t) => void details.push(t), end: () => undefined },
    },
  });
  runs.push(run);
  expect(run.result.outcome).toBe('ready-for-review');
  return run;
}

describe('tool errors and commands are visible', () => {
  it('the progress shows the error text of a failed tool call, and the command a run_command runs', async () => {
    const details: string[] = [];
    await runWithErrors(details);
    const edit = details.find((d) => d.startsWith('turn 1: edit_file error:'));
    expect(edit).toMatch(/search/i);
    expect(details).toContain('turn 2: running: npm test');
    // Long commands are cut on the progress line.
    expect(details.find((d) => d.startsWith('turn 3: running: echo xxx'))?.length).toBeLessThan(120);
  });

  it('logs shows the error text (escaped on the terminal), not just "error"', async () => {
    const run = await runWithErrors([]);
    const ctx = capturedContext(run.root);
    expect(await logsCommand(ctx, 'last', { runsDir: run.runsDir })).toBe(0);
    const line = ctx
      .out()
      .split('\n')
      .find((l) => l.includes('tool_call') && l.includes('edit_file'));
    expect(line).toMatch(/edit_file\s+error\s+.*\S+.*search/i);
    expect(ctx.out()).not.toContain('\u001b');
  });

  it('logs --verbose adds the whole conversation: model text, tool inputs and results, cut with a note', async () => {
    const run = await runWithErrors([]);
    const ctx = capturedContext(run.root);
    expect(await logsCommand(ctx, 'last', { runsDir: run.runsDir, verbose: true })).toBe(0);
    const out = ctx.out();
    expect(out).toContain('conversation:');
    expect(out).toContain('=== attempt 1 (maker)');
    expect(out).toContain('Let me look at the threshold first.');
    expect(out).toContain('tool call edit_file (m1):');
    expect(out).toContain('"search": "NOT THERE \\u001b[2J"');
    expect(out).toMatch(/tool result \(error\) \(m1\):/);
    expect(out).toContain('tool call run_command (c1):');
    expect(out).toMatch(/… \(\d+ more characters cut; the whole text is in transcript\.json\)/);
    expect(out).not.toContain('\u001b');
    // Without --verbose, none of it.
    const plain = capturedContext(run.root);
    await logsCommand(plain, 'last', { runsDir: run.runsDir });
    expect(plain.out()).not.toContain('conversation:');
  });

  it('formatConversation skips what is not of the expected shape', () => {
    expect(formatConversation('nope')).toEqual([
      '(no conversation recorded: transcript.json is missing or not a list)',
    ]);
    expect(
      formatConversation([
        { attempt: 1, messages: [{ role: 'assistant', content: [{ type: 'weird' }, 5] }] },
      ]),
    ).toEqual(['', '=== attempt 1']);
  });

  it('toolStartDetail names the tool and its path for file tools', () => {
    expect(toolStartDetail({ name: 'read_file', input: { path: 'src/a.ts' }, turn: 4 })).toBe(
      'turn 4: read_file src/a.ts',
    );
    expect(toolStartDetail({ name: 'run_command', input: { command: 'npm\n test' }, turn: 1 })).toBe(
      'turn 1: running: npm test',
    );
  });
});
