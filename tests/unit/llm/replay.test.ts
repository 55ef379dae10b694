import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../../src/errors.js';
import { createProvider, ProviderSession } from '../../../src/llm/provider-registry.js';
import { RecordingProvider } from '../../../src/llm/recording.js';
import { loadCassette, ReplayProvider, type Cassette, type CassetteTurn } from '../../../src/llm/replay.js';
import type { CompletionRequest, ModelProvider, ModelRole } from '../../../src/llm/types.js';

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
    const error = await loadCassette(
      await tempFile('v3.json', JSON.stringify({ ...cassette, version: 3 })),
    ).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).problems).toEqual(['version: expected 1 or 2, got 3']);
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

function said(text: string): CassetteTurn {
  return {
    content: [{ type: 'text', text }],
    stopReason: 'end_turn',
    usage: { inputTokens: 1, outputTokens: 1 },
  };
}

function textOf(completion: { content: { type: string; text?: string }[] }): string | undefined {
  return completion.content[0]?.text;
}

const threeRoles: Cassette = {
  version: 2,
  model: 'maker-model',
  roles: {
    main: { turns: [said('main 1'), said('main 2'), said('main 3')] },
    delegate: { turns: [said('delegate 1'), said('delegate 2')] },
    checker: { model: 'checker-model', turns: [said('checker 1'), said('checker 2')] },
  },
};

async function rolesOf(file: string, session: ProviderSession): Promise<Record<ModelRole, ModelProvider>> {
  const of = (role: ModelRole) => createProvider({ name: 'replay', cassette: file, role, session, env: {} });
  return { main: await of('main'), delegate: await of('delegate'), checker: await of('checker') };
}

describe('version-2 cassettes: one queue per role', () => {
  it.each([
    ['main first', ['main', 'main', 'delegate', 'delegate', 'main', 'checker', 'checker']],
    ['interleaved', ['checker', 'delegate', 'main', 'checker', 'main', 'delegate', 'main']],
  ] as const)('plays each role its own turns in order (%s)', async (_how, order) => {
    const file = await tempFile('roles.json', JSON.stringify(threeRoles));
    const providers = await rolesOf(file, new ProviderSession());
    const heard: Record<ModelRole, string[]> = { main: [], delegate: [], checker: [] };
    for (const role of order) heard[role].push(textOf(await providers[role].complete(request(role))) ?? '');
    expect(heard).toEqual({
      main: ['main 1', 'main 2', 'main 3'],
      delegate: ['delegate 1', 'delegate 2'],
      checker: ['checker 1', 'checker 2'],
    });
  });

  it("labels each role with its own model, else the cassette's", async () => {
    const file = await tempFile('roles.json', JSON.stringify(threeRoles));
    const providers = await rolesOf(file, new ProviderSession());
    expect([providers.main.model, providers.delegate.model, providers.checker.model]).toEqual([
      'maker-model',
      'maker-model',
      'checker-model',
    ]);
    expect((await providers.checker.complete(request('x'))).model).toBe('checker-model');
  });

  it('shares positions between providers of one session, and not between sessions', async () => {
    const file = await tempFile('roles.json', JSON.stringify(threeRoles));
    const session = new ProviderSession();
    const first = await createProvider({ name: 'replay', cassette: file, session, env: {} });
    const second = await createProvider({ name: 'replay', cassette: file, session, env: {} });
    const alone = await createProvider({ name: 'replay', cassette: file, env: {} });
    expect(textOf(await first.complete(request('a')))).toBe('main 1');
    expect(textOf(await second.complete(request('b')))).toBe('main 2');
    expect(textOf(await alone.complete(request('c')))).toBe('main 1');
  });

  it('names the role, the file and the turn when a role runs out', async () => {
    const file = await tempFile('roles.json', JSON.stringify(threeRoles));
    const { checker } = await rolesOf(file, new ProviderSession());
    await checker.complete(request('1'));
    await checker.complete(request('2'));
    const error = await checker.complete(request('3')).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).message).toBe(
      `cassette ${file} ran out for role "checker": turn 3 was requested but it has only 2 turns for that role`,
    );
    expect((error as ConfigError).details).toEqual({ file, role: 'checker', turn: 3 });
  });

  it('says a version-1 cassette holds only the main agent when another role asks', async () => {
    const file = await tempFile('v1.json', JSON.stringify(cassette));
    const { main, delegate } = await rolesOf(file, new ProviderSession());
    expect(textOf(await main.complete(request('1')))).toBe('Running the tests.');
    const error = await delegate.complete(request('sub-task')).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).message).toBe(
      `cassette ${file} has no turns for role "delegate": delegate turn 1 was requested`,
    );
    expect((error as ConfigError).hint).toMatch(/version-1 cassette holds only the main agent's turns/);
  });

  it('refuses an unknown role and a bad turn, naming the field', async () => {
    const bad = {
      version: 2,
      model: 'm',
      roles: { main: { turns: [] }, reviewer: { turns: [] }, checker: { turns: [{ content: [] }] } },
    };
    const error = await loadCassette(await tempFile('bad-v2.json', JSON.stringify(bad))).catch(
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(ConfigError);
    const problems = (error as ConfigError).problems.join('\n');
    expect(problems).toMatch(/roles: .*"reviewer".*\(the roles are main, delegate, checker\)/);
    expect(problems).toMatch(/roles\.checker\.turns\[0\]\.stopReason/);
  });
});

describe('recording every role of a run', () => {
  it('writes one version-2 cassette whose roles replay what each role heard', async () => {
    const source = await tempFile('roles.json', JSON.stringify(threeRoles));
    const recording = new ProviderSession({ record: true });
    const live = await rolesOf(source, recording);
    const order: ModelRole[] = ['main', 'checker', 'main', 'checker', 'main'];
    const heard = [];
    for (const role of order) heard.push(await live[role].complete(request(role)));
    const file = join(await mkdtemp(join(tmpdir(), 'record-test-')), 'session.json');
    await recording.recorder?.save(file);

    const saved = JSON.parse(await readFile(file, 'utf8')) as Cassette;
    expect(saved.version).toBe(2);
    expect(saved).toMatchObject({
      model: 'maker-model',
      roles: { main: { model: 'maker-model' }, checker: { model: 'checker-model' } },
    });
    expect(Object.keys(saved.version === 2 ? saved.roles : {})).toEqual(['main', 'checker']);

    // Replayed in another interleaving, every role hears the same answers in the same order.
    const replay = await rolesOf(file, new ProviderSession());
    const again = new Map<ModelRole, unknown[]>();
    for (const role of ['checker', 'checker', 'main', 'main', 'main'] as const) {
      const c = await replay[role].complete(request(role));
      again.set(role, [...(again.get(role) ?? []), [c.content, c.stopReason, c.usage, c.model]]);
    }
    for (const role of ['main', 'checker'] as const) {
      expect(again.get(role)).toEqual(
        heard.filter((_, i) => order[i] === role).map((c) => [c.content, c.stopReason, c.usage, c.model]),
      );
    }
  });

  it('stays version 1 while only the main agent spoke', async () => {
    const session = new ProviderSession({ record: true });
    const main = await createProvider({
      name: 'replay',
      cassette: await tempFile('v1.json', JSON.stringify(cassette)),
      session,
      env: {},
    });
    await main.complete(request('1'));
    expect(session.recorder?.toCassette()).toEqual({
      version: 1,
      model: 'demo-model',
      turns: [cassette.turns[0]],
    });
  });
});
