/**
 * The catalog's setup, without an engine: its schema, the layers a verification runs, and
 * the setups an eval's trials share (made once, a failure shared too, removed once drained).
 */
import { describe, expect, it } from 'vitest';
import { catalogSchema, testLayers, verificationLayers } from '../../../src/catalog/schema.js';
import { setupSpec } from '../../../src/fix/setup.js';
import { SetupFailed, SetupStates, type SetupState } from '../../../src/fix/setup-states.js';
import type { SandboxBackend } from '../../../src/sandbox/types.js';
import { progressOfEvents } from '../../../src/fix/progress.js';
import { brokenKey } from '../../../src/fix/baseline.js';
import type { RunEvent } from '../../../src/runs/journal.js';
import type { EventInput } from '../../../src/agent/events.js';

const base = {
  name: 'svc',
  owner: 'team',
  repo: 'repo',
  agent: { editableFiles: ['src/**'], testCommand: 'npm test' },
};

function state(image: string, removed: string[], fail = false): SetupState {
  const backend = {
    removeForkImage: async (name: string) => {
      if (fail) throw new Error('engine said no');
      removed.push(name);
      return true;
    },
  } as unknown as SandboxBackend;
  return { image, imageId: `sha256:${image}`, madeBy: 'run-1', durationMs: 5, backend };
}

describe('catalog sandbox.setup', () => {
  it('is a command, not shared by default, run as the first layer of a verification and not told to the agent', () => {
    const catalog = catalogSchema.parse({ ...base, sandbox: { setup: { command: 'npm run build' } } });
    expect(catalog.sandbox.setup).toEqual({ command: 'npm run build', shared: false });
    expect(verificationLayers(catalog)).toEqual([
      { name: 'setup', command: 'npm run build' },
      { name: 'test', command: 'npm test' },
    ]);
    expect(testLayers(catalog)).toEqual([{ name: 'test', command: 'npm test' }]);
    expect(verificationLayers(catalogSchema.parse(base))).toEqual(testLayers(catalogSchema.parse(base)));
  });

  it('refuses an empty command, an unknown key, and a test layer that takes its name', () => {
    const problems = (sandbox: unknown, agent: object = base.agent) =>
      catalogSchema
        .safeParse({ ...base, agent, sandbox })
        .error?.issues.map((i) => [i.path.join('.'), i.message]);
    expect(problems({ setup: { command: '' } })?.[0]?.[0]).toBe('sandbox.setup.command');
    expect(problems({ setup: { command: 'x', shraed: true } })?.[0]?.[0]).toBe('sandbox.setup');
    expect(problems({ setup: { command: 'x', shared: 'yes' } })?.[0]).toEqual([
      'sandbox.setup.shared',
      'expected true or false',
    ]);
    expect(
      problems(
        { setup: { command: 'make' } },
        {
          ...base.agent,
          testCommand: [
            { name: 'unit', command: 'npm test' },
            { name: 'setup', command: 'npm run e2e' },
          ],
        },
      ),
    ).toEqual([
      [
        'agent.testCommand.1.name',
        '"setup" is the name of sandbox.setup\'s layer in a verification; name this layer otherwise',
      ],
    ]);
  });
});

describe('a broken command names its key', () => {
  it("the setup's layer points at sandbox.setup.command; a test layer, even one named setup without a setup, at agent.testCommand", () => {
    const withSetup = catalogSchema.parse({ ...base, sandbox: { setup: { command: 'make gen' } } });
    const layered = catalogSchema.parse({
      ...base,
      agent: { ...base.agent, testCommand: [{ name: 'setup', command: 'make' }] },
    });
    expect(brokenKey({ layer: 'setup' }, withSetup)).toBe('sandbox.setup.command');
    expect(brokenKey({ layer: 'test' }, withSetup)).toBe('agent.testCommand');
    expect(brokenKey({ layer: 'setup' }, layered)).toBe('agent.testCommand');
  });
});

describe('SetupStates', () => {
  it('makes a key once for every run asking at once, and says which runs reused it', async () => {
    const states = new SetupStates();
    let made = 0;
    const removed: string[] = [];
    const make = async () => {
      made++;
      await new Promise((resolve) => setTimeout(resolve, 5));
      return state('sandbox-harness-fork:a', removed);
    };
    const [first, second] = await Promise.all([states.get('k', make), states.get('k', make)]);
    expect(made).toBe(1);
    expect([first.reused, second.reused]).toEqual([false, true]);
    expect(second.state).toBe(first.state);
    expect(states.holds('sandbox-harness-fork:a')).toBe(true);
    // Another key (another image, catalog, runtime or held-out set) is made anew.
    await states.get('other', async () => state('sandbox-harness-fork:b', removed));
    expect(await states.drain()).toEqual([]);
    expect(removed.sort()).toEqual(['sandbox-harness-fork:a', 'sandbox-harness-fork:b']);
    expect(states.holds('sandbox-harness-fork:a')).toBe(false);
  });

  it("a setup command that failed fails every run of its key; another failure was its run's, and the next run makes it anew", async () => {
    const states = new SetupStates();
    let made = 0;
    const failing = async (): Promise<SetupState> => {
      made++;
      throw new SetupFailed('the setup command failed (exit 3)');
    };
    await expect(states.get('k', failing)).rejects.toThrow('exit 3');
    await expect(states.get('k', failing)).rejects.toBeInstanceOf(SetupFailed);
    expect(made).toBe(1);

    // The maker's run stopped (its own time limit) while another run waited: that one makes it.
    const removed: string[] = [];
    let release: (error: Error) => void = () => undefined;
    const stopped = states.get('s', () => new Promise<SetupState>((_, reject) => (release = reject)));
    const waiting = states.get('s', async () => state('sandbox-harness-fork:s', removed));
    release(new Error('the run time limit passed'));
    await expect(stopped).rejects.toThrow('time limit');
    expect(await waiting).toMatchObject({ reused: false, state: { image: 'sandbox-harness-fork:s' } });
    expect(await states.get('s', failing)).toMatchObject({ reused: true });
    expect(await states.drain()).toEqual([]);
    expect(removed).toEqual(['sandbox-harness-fork:s']);
  });

  it('drain reports an image it could not remove, and goes on with the others', async () => {
    const states = new SetupStates();
    const removed: string[] = [];
    await states.get('a', async () => state('sandbox-harness-fork:a', removed, true));
    await states.get('b', async () => state('sandbox-harness-fork:b', removed));
    expect(await states.drain()).toEqual([{ image: 'sandbox-harness-fork:a', message: 'engine said no' }]);
    expect(removed).toEqual(['sandbox-harness-fork:b']);
  });

  it("knows a trial's own setups, which an eval's pool warms nothing from", () => {
    const states = new SetupStates();
    states.noteTrialOwn('sandbox-harness-fork:t1');
    expect(states.isTrialOwn('sandbox-harness-fork:t1')).toBe(true);
    expect(states.isTrialOwn('sandbox-harness-fork:shared')).toBe(false);
  });
});

describe('setupSpec', () => {
  it("makes the attempts' sandboxes from the setup, scanned against the pristine tree; no other role", () => {
    const run = { setup: state('sandbox-harness-fork:s', []) };
    expect(setupSpec(run, 'attempt-2', 'repo:pristine')).toEqual({
      image: 'sandbox-harness-fork:s',
      scanAgainst: 'repo:pristine',
    });
    for (const role of ['verify-1', 'baseline', 'review-1', 'setup', 'verify-1-visible'])
      expect(setupSpec(run, role, 'repo:pristine')).toEqual({});
    expect(setupSpec({}, 'attempt-1', 'repo:pristine')).toEqual({});
  });
});

describe('the progress line of a setup', () => {
  it('shows the command while it runs, then how long it took, or which trial made the shared one', () => {
    const lines: string[] = [];
    const line = progressOfEvents({
      phase: (phase, text) => lines.push(`phase ${phase} ${text}`),
      detail: (text) => lines.push(`detail ${text}`),
      end: (text) => lines.push(`end ${text}`),
    });
    // As the journal hands its events to the run's sinks.
    const emit = (event: RunEvent) => line.emit(event as unknown as EventInput);
    const setup = { command: 'make gen', image: 'sandbox-harness-fork:r-1', durationMs: 1500, shared: true };
    emit({ kind: 'setup_start', command: 'make gen' });
    emit({ kind: 'setup', setup });
    emit({ kind: 'setup_start', command: 'make gen' });
    emit({ kind: 'setup', setup: { ...setup, reusedFrom: 'task-t0-x' } });
    expect(lines).toEqual([
      'phase setup setup: make gen',
      'end made in 1.5s',
      'phase setup setup: make gen',
      'end shared: made by task-t0-x',
    ]);
  });
});
