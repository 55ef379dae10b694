import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../../src/errors.js';
import { createProvider } from '../../../src/llm/registry.js';
import { RecordingProvider } from '../../../src/llm/recording.js';
import { loadCassette, ReplayProvider, type Cassette } from '../../../src/llm/replay.js';
import type { CompletionRequest } from '../../../src/llm/types.js';

const cassette: Cassette = {
  version: 1,
  model: 'demo-model',
  turns: [
    {
      content: [
        { type: 'text', text: 'Running the tests.' },
        { type: 'tool_use', id: 't1', name: 'run_command', input: { command: 'npm test' } },
      ],
      stopReason: 'tool_use',
      usage: { inputTokens: 10, outputTokens: 5 },
    },
    { content: [{ type: 'text', text: 'Done.' }], stopReason: 'end_turn' },
  ],
};

function request(text: string): CompletionRequest {
  return {
    system: 'sys',
    messages: [{ role: 'user', content: [{ type: 'text', text }] }],
    tools: [],
    maxTokens: 100,
  };
}

async function tempFile(name: string, content: string): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'replay-test-'));
  const file = join(dir, name);
  await writeFile(file, content);
  return file;
}

describe('ReplayProvider', () => {
  it('plays the turns in order and records what it was asked', async () => {
    const provider = new ReplayProvider(cassette, 'demo.json');
    const first = await provider.complete(request('one'));
    const second = await provider.complete(request('two'));
    expect(first).toEqual({
      content: cassette.turns[0]?.content,
      stopReason: 'tool_use',
      usage: { inputTokens: 10, outputTokens: 5 },
      model: 'demo-model',
    });
    expect(second.content).toEqual([{ type: 'text', text: 'Done.' }]);
    expect(second.usage.inputTokens).toBeGreaterThan(0);
    expect(provider.requests.map((r) => r.messages[0]?.content[0])).toEqual([
      { type: 'text', text: 'one' },
      { type: 'text', text: 'two' },
    ]);
  });

  it('fails, naming the cassette file and the turn, when the cassette runs out', async () => {
    const file = await tempFile('short.json', JSON.stringify(cassette));
    const provider = await createProvider({ name: 'replay', cassette: file, env: {} });
    await provider.complete(request('1'));
    await provider.complete(request('2'));
    const error = await provider.complete(request('3')).catch((e: unknown) => e);
    // A replay is deterministic: running out is the cassette's fault (an error), never infrastructure.
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).category).toBe('config');
    expect((error as ConfigError).message).toContain(file);
    expect((error as ConfigError).message).toMatch(/turn 3 was requested but it has only 2 turns/);
  });

  it('rejects an invalid cassette with a ConfigError naming the file and the field', async () => {
    const file = await tempFile(
      'bad.json',
      JSON.stringify({ version: 1, model: 'm', turns: [{ content: [], stop_reason: 'end_turn' }] }),
    );
    const error = await loadCassette(file).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).message).toContain(file);
    expect((error as ConfigError).problems.join('\n')).toMatch(/turns\[0\]\.stopReason/);
  });

  it('rejects another cassette version and broken JSON', async () => {
    await expect(
      loadCassette(await tempFile('v2.json', JSON.stringify({ ...cassette, version: 2 }))),
    ).rejects.toBeInstanceOf(ConfigError);
    await expect(loadCassette(await tempFile('broken.json', '{"version": 1,'))).rejects.toThrow(
      /not valid JSON/,
    );
  });
});

describe('RecordingProvider', () => {
  it('saves what it recorded as a cassette that replays the same answers', async () => {
    const recorder = new RecordingProvider(new ReplayProvider(cassette), 'live-session');
    const live = [await recorder.complete(request('a')), await recorder.complete(request('b'))];
    const dir = await mkdtemp(join(tmpdir(), 'record-test-'));
    const file = join(dir, 'nested', 'session.json');
    await recorder.save(file);
    const saved = JSON.parse(await readFile(file, 'utf8')) as Cassette;
    expect(saved.model).toBe('live-session');
    const replay = await ReplayProvider.fromFile(file);
    const replayed = [await replay.complete(request('a')), await replay.complete(request('b'))];
    expect(replayed.map((c) => [c.content, c.stopReason, c.usage])).toEqual(
      live.map((c) => [c.content, c.stopReason, c.usage]),
    );
  });
});
