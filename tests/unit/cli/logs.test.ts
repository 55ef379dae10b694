/**
 * What a person sees of a tool call: its error text on the progress line and in `logs`, the
 * command a long `run_command` is running, and with `logs --verbose` the whole conversation.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { logsCommand } from '../../../src/cli/commands/logs.js';
import { CONVERSATION_ITEM_CHARS, formatConversation } from '../../../src/cli/conversation-text.js';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { TOOL_INPUT_CHARS, toolInputSummary } from '../../../src/agent/tool-summary.js';
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
    const edit = details.find((d) => d.startsWith('turn 1: edit_file src/shipping.ts'));
    expect(edit).toMatch(/\(\d+ms\) error: .*search/i);
    expect(details.find((d) => d.startsWith('turn 2: run_command npm test'))).toMatch(/\(exit 1, \d+ms\)$/);
    // Long commands are cut on the progress line.
    expect(details.find((d) => d.startsWith('turn 3: run_command echo xxx'))?.length).toBeLessThan(140);
  });

  it('a log shows each tool call once, as it ends, with what it used, its exit code and time', async () => {
    const details: string[] = [];
    const ticks: string[] = [];
    const run = await memoryRun({
      turns,
      overrides: {
        progress: {
          phase: () => undefined,
          detail: (t) => void details.push(t),
          tick: (t) => void ticks.push(t),
          end: () => undefined,
        },
      },
    });
    runs.push(run);
    const calls = details.filter((d) => /^turn \d+: (?!model answered)/.test(d));
    // Four calls (the failed edit, two commands, the fixing edit): four lines.
    expect(calls).toHaveLength(4);
    expect(calls.filter((d) => d.startsWith('turn 2:'))).toEqual([
      expect.stringMatching(/^turn 2: run_command npm test \(exit 1, \d+ms\)$/),
    ]);
    expect(calls.filter((d) => d.includes('running:'))).toEqual([]);
    // The start of a call shows on a live line only (a terminal's tick), never as a log line.
    expect(ticks).toContain('turn 2: running: npm test');
  });

  it('the event log and logs name the file, command or pattern of every tool call', async () => {
    const run = await runWithErrors([]);
    const events = (await readFile(join(run.result.runDir, 'events.jsonl'), 'utf8'))
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { kind: string; tool?: string; input?: string });
    const inputs = events.filter((e) => e.kind === 'tool_call').map((e) => e.input);
    expect(inputs[0]).toBe('src/shipping.ts');
    expect(inputs[1]).toBe('npm test');
    // Cut, one line.
    expect(inputs[2]!.length).toBe(TOOL_INPUT_CHARS);
    expect(inputs[2]!.endsWith('…')).toBe(true);
    const ctx = capturedContext(run.root);
    await logsCommand(ctx, 'last', { runsDir: run.runsDir });
    expect(ctx.out()).toMatch(/tool_call\s+a1 t2\s+run_command\s+npm test\s+exit 1/);
    expect(ctx.out()).toMatch(/tool_call\s+a1 t1\s+edit_file\s+src\/shipping\.ts\s+error/);
  });

  it('a call input with control characters is one line in the log, and escaped on the terminal', async () => {
    const run = await memoryRun({
      turns: [
        { content: [toolUse('x1', 'run_command', { command: 'printf "\\e[2J";\r\n\techo \u001b[31mred' })] },
        ...fixingTurns,
      ],
    });
    runs.push(run);
    const ctx = capturedContext(run.root);
    await logsCommand(ctx, 'last', { runsDir: run.runsDir });
    const line = ctx
      .out()
      .split('\n')
      .find((l) => l.includes('run_command'));
    expect(line).toContain('printf "\\e[2J"; echo \\e[31mred');
    expect(ctx.out()).not.toContain('\u001b');
  });

  it('toolInputSummary says what each tool used', () => {
    expect(toolInputSummary('search', { pattern: 'FREE_SHIPPING', path: 'src' })).toBe(
      'FREE_SHIPPING in src',
    );
    expect(toolInputSummary('search', { pattern: 'x' })).toBe('x');
    expect(toolInputSummary('list_files', { pattern: '*.ts' })).toBe('. *.ts');
    expect(toolInputSummary('list_files', {})).toBeUndefined();
    expect(toolInputSummary('write_file', { path: 'a.ts', content: 'long' })).toBe('a.ts');
    expect(toolInputSummary('delegate', { task: 'find\nthe tests' })).toBe('find the tests');
    expect(toolInputSummary('read_file', { path: 5 })).toBeUndefined();
    expect(toolInputSummary('read_file', 'not an object')).toBeUndefined();
  });

  it('logs shows the error text (escaped on the terminal), not just "error"', async () => {
    const run = await runWithErrors([]);
    const ctx = capturedContext(run.root);
    expect(await logsCommand(ctx, 'last', { runsDir: run.runsDir })).toBe(0);
    const line = ctx
      .out()
      .split('\n')
      .find((l) => l.includes('tool_call') && l.includes('edit_file'));
    expect(line).toMatch(/edit_file\s+src\/shipping\.ts\s+error\s+.*\S+.*search/i);
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
