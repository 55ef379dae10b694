import { mkdtemp, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { fanOut, JsonlEventSink, MemoryEventSink, secretValuesFromEnv } from '../../../src/agent/events.js';

async function logFile(): Promise<string> {
  return join(await mkdtemp(join(tmpdir(), 'events-')), 'run', 'events.jsonl');
}

describe('JsonlEventSink', () => {
  it('appends one JSON object per line with an ISO time', async () => {
    const file = await logFile();
    const sink = new JsonlEventSink(file, { secrets: [] });
    sink.emit({ kind: 'tool_call', tool: 'run_command', durationMs: 12, exitCode: 1, isError: false });
    new JsonlEventSink(file, { secrets: [] }).emit({ kind: 'model_call', tokens: { input: 5, output: 2 } });
    const lines = (await readFile(file, 'utf8')).trimEnd().split('\n');
    expect(lines).toHaveLength(2);
    const [first, second] = lines.map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(first).toMatchObject({
      kind: 'tool_call',
      tool: 'run_command',
      durationMs: 12,
      exitCode: 1,
      isError: false,
    });
    expect(new Date(String(first?.['time'])).toISOString()).toBe(first?.['time']);
    expect(second).toMatchObject({ kind: 'model_call', tokens: { input: 5, output: 2 } });
  });

  it('scrubs secret values should a message ever quote one', async () => {
    const file = await logFile();
    new JsonlEventSink(file, { secrets: ['sk-ant-canary-123456'] }).emit({
      kind: 'model_call',
      message: 'key sk-ant-canary-123456 refused',
    });
    expect(await readFile(file, 'utf8')).toContain('key [redacted] refused');
  });
});

describe('secretValuesFromEnv', () => {
  it('picks values of credential-looking variables only', () => {
    expect(
      secretValuesFromEnv({
        ANTHROPIC_API_KEY: 'sk-ant-123456789',
        GITHUB_TOKEN: 'ghp_abcdefgh',
        PATH: '/usr/bin:/bin',
        SHORT_KEY: 'x',
      }),
    ).toEqual(['sk-ant-123456789', 'ghp_abcdefgh']);
  });
});

describe('fanOut', () => {
  it('gives every sink the same stamped event', () => {
    const a = new MemoryEventSink();
    const b = new MemoryEventSink();
    fanOut(a, b).emit({ kind: 'attempt_start', attempt: 1 });
    expect(a.events).toHaveLength(1);
    expect(a.events).toEqual(b.events);
    expect(a.events[0]).toMatchObject({ kind: 'attempt_start', attempt: 1 });
  });
});
