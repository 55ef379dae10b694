/**
 * What `gc` and the start-up reaper remove, decided on labels, names and ages: a fake
 * engine that applies label filters the way the daemon does records every removal.
 */
import { spawn } from 'node:child_process';
import { hostname } from 'node:os';
import { beforeAll, describe, expect, it } from 'vitest';
import type { ContainerSummary, ImageSummary } from '../../../src/sandbox/docker/engine/index.js';
import {
  collectGarbage,
  reapOrphans,
  type GcEngine,
} from '../../../src/sandbox/docker/operator/collect-garbage.js';
import { KEPT_NAME_PREFIX, LABEL } from '../../../src/sandbox/docker/labels.js';

const HOUR = 3_600_000;
let deadPid = 0;

beforeAll(async () => {
  deadPid = await new Promise<number>((resolve) => {
    const child = spawn('true');
    child.on('exit', () => resolve(child.pid!));
  });
});

interface Spec {
  name: string;
  run?: string;
  kept?: boolean;
  /** Whose container: a dead process here (default), this very process, a live one, or another host. */
  owner?: 'dead' | 'self' | 'alive' | 'other-host';
  ageMs?: number;
  image?: string;
}

function container(spec: Spec): ContainerSummary {
  const owner = spec.owner ?? 'dead';
  const pid = owner === 'self' ? process.pid : owner === 'alive' ? process.ppid : deadPid;
  return {
    id: `id-${spec.name}`,
    name: `${spec.kept ? KEPT_NAME_PREFIX : 'sandbox-harness-'}${spec.name}`,
    image: spec.image ?? 'sandbox-harness/repo-x:1',
    state: 'exited',
    labels: {
      [LABEL.marker]: '1',
      [LABEL.run]: spec.run ?? `run-${spec.name}`,
      [LABEL.ownerPid]: String(pid),
      [LABEL.ownerHost]: owner === 'other-host' ? `not-${hostname()}` : hostname(),
    },
    createdAt: new Date(Date.now() - (spec.ageMs ?? 60_000)),
  };
}

function image(tag: string, ageMs = 48 * HOUR): ImageSummary {
  return {
    id: `sha256:${tag}`,
    tags: [tag],
    labels: { [LABEL.marker]: '1', [LABEL.kind]: 'repo' },
    createdAt: new Date(Date.now() - ageMs),
    sizeBytes: 1,
  };
}

/** The daemon's label filter: `key` means the label is present, `key=value` that it has that value. */
function matches(labels: Record<string, string>, filter: Record<string, string | true>): boolean {
  return Object.entries(filter).every(([k, v]) => (v === true ? k in labels : labels[k] === v));
}

function fakeEngine(containers: ContainerSummary[], images: ImageSummary[] = []) {
  const removed = { containers: [] as string[], images: [] as string[] };
  const engine: GcEngine = {
    containers: {
      list: async (filter) => containers.filter((c) => matches(c.labels, filter)),
      remove: async (id) => {
        removed.containers.push(id);
      },
    },
    images: {
      list: async (filter) => images.filter((i) => matches(i.labels, filter)),
      remove: async (ref) => {
        removed.images.push(ref);
        return true;
      },
    },
  };
  return { engine, removed };
}

const names = (ids: string[]) => ids.map((id) => id.replace(/^id-/, '')).sort();

describe('gc', () => {
  const world = () =>
    fakeEngine(
      [
        container({ name: 'orphan' }),
        container({ name: 'old-orphan', ageMs: 48 * HOUR }),
        container({ name: 'kept', kept: true }),
        container({ name: 'old-kept', kept: true, ageMs: 48 * HOUR, image: 'sandbox-harness/repo-y:1' }),
        container({ name: 'mine', owner: 'self' }),
        container({ name: 'live', owner: 'alive', ageMs: 48 * HOUR }),
        container({ name: 'live-kept', owner: 'alive', kept: true, ageMs: 48 * HOUR }),
        container({ name: 'remote', owner: 'other-host' }),
        container({ name: 'old-remote-kept', owner: 'other-host', kept: true, ageMs: 48 * HOUR }),
      ],
      [
        image('sandbox-harness/repo-x:1'),
        image('sandbox-harness/repo-y:1'),
        image('sandbox-harness/repo-z:1'),
      ],
    );

  it('without options removes orphans of this host only: not kept ones, not a live or another host’s', async () => {
    const { engine, removed } = world();
    const report = await collectGarbage(engine);
    expect(names(removed.containers)).toEqual(['mine', 'old-orphan', 'orphan']);
    expect(names(report.containers.map((c) => c.id))).toEqual(['mine', 'old-orphan', 'orphan']);
    expect(removed.images).toEqual([]);
  });

  it('--older-than removes only what is older, kept containers included (a live owner’s too), never a live owner’s unkept one', async () => {
    const { engine, removed } = world();
    await collectGarbage(engine, { olderThanMs: 24 * HOUR });
    expect(names(removed.containers)).toEqual(['live-kept', 'old-kept', 'old-orphan', 'old-remote-kept']);
  });

  it('--run removes that run’s containers, kept ones included, and nothing else', async () => {
    const { engine, removed } = fakeEngine([
      container({ name: 'a-attempt', run: 'run-a' }),
      container({ name: 'a-verify', run: 'run-a', kept: true }),
      container({ name: 'b-attempt', run: 'run-b', kept: true }),
      container({ name: 'a-live', run: 'run-a', owner: 'alive' }),
      container({ name: 'a-live-kept', run: 'run-a', owner: 'alive', kept: true }),
    ]);
    const report = await collectGarbage(engine, { runId: 'run-a' });
    expect(names(removed.containers)).toEqual(['a-attempt', 'a-live-kept', 'a-verify']);
    expect(report.containers.map((c) => [c.run, c.kept])).toEqual([
      ['run-a', false],
      ['run-a', true],
      ['run-a', true],
    ]);
  });

  it('--all removes kept containers and the repo images no remaining container uses', async () => {
    const { engine, removed } = world();
    const report = await collectGarbage(engine, { all: true });
    expect(names(removed.containers)).toEqual([
      'kept',
      'live-kept',
      'mine',
      'old-kept',
      'old-orphan',
      'old-remote-kept',
      'orphan',
      'remote',
    ]);
    // repo-x is still used by the live unkept container; repo-y only by removed ones; repo-z by none.
    expect(removed.images.sort()).toEqual([
      'sha256:sandbox-harness/repo-y:1',
      'sha256:sandbox-harness/repo-z:1',
    ]);
    expect(report.images.map((i) => i.tags[0]).sort()).toEqual([
      'sandbox-harness/repo-y:1',
      'sandbox-harness/repo-z:1',
    ]);
  });

  it('--all with --older-than keeps younger images', async () => {
    const { engine, removed } = fakeEngine(
      [],
      [image('sandbox-harness/repo-new:1', HOUR), image('sandbox-harness/repo-old:1')],
    );
    await collectGarbage(engine, { all: true, olderThanMs: 24 * HOUR });
    expect(removed.images).toEqual(['sha256:sandbox-harness/repo-old:1']);
  });

  it('--dry-run reports the same as a real run and removes nothing', async () => {
    const dry = world();
    const wet = world();
    const planned = await collectGarbage(dry.engine, { all: true, dryRun: true });
    const done = await collectGarbage(wet.engine, { all: true });
    expect(dry.removed).toEqual({ containers: [], images: [] });
    expect(planned).toEqual(done);
  });
});

describe('the start-up reaper', () => {
  it('removes unkept containers of dead processes on this host, nothing else', async () => {
    const { engine, removed } = fakeEngine([
      container({ name: 'orphan' }),
      container({ name: 'kept', kept: true }),
      container({ name: 'mine', owner: 'self' }),
      container({ name: 'live', owner: 'alive' }),
      container({ name: 'remote', owner: 'other-host' }),
      { ...container({ name: 'no-pid' }), labels: { [LABEL.marker]: '1', [LABEL.ownerHost]: hostname() } },
    ]);
    expect(names(await reapOrphans(engine))).toEqual(['orphan']);
    expect(names(removed.containers)).toEqual(['orphan']);
  });
});

describe('gc of fork images', () => {
  function fork(name: string, owner: 'dead' | 'alive', run = `run-${name}`): ImageSummary {
    return {
      id: `sha256:${name}`,
      tags: [`sandbox-harness-fork:${name}`],
      labels: {
        [LABEL.marker]: '1',
        [LABEL.kind]: 'fork',
        [LABEL.run]: run,
        [LABEL.ownerPid]: String(owner === 'dead' ? deadPid : process.ppid),
        [LABEL.ownerHost]: hostname(),
      },
      createdAt: new Date(Date.now() - HOUR),
      sizeBytes: 1,
    };
  }

  it("removes, with no option, the forks of a run whose process is gone, never a live run's nor one a kept sandbox uses", async () => {
    const { engine, removed } = fakeEngine(
      [container({ name: 'kept-child', kept: true, image: 'sandbox-harness-fork:used' })],
      [fork('dead', 'dead'), fork('live', 'alive'), fork('used', 'dead'), image('sandbox-harness/repo-z:1')],
    );
    const report = await collectGarbage(engine);
    expect(report.images.map((i) => i.id)).toEqual(['sha256:dead']);
    expect(removed.images).toEqual(['sha256:dead']);
  });

  it("removes a named run's forks, even while its process lives", async () => {
    const { engine, removed } = fakeEngine([], [fork('a', 'alive', 'run-a'), fork('b', 'alive', 'run-b')]);
    await collectGarbage(engine, { runId: 'run-a' });
    expect(removed.images).toEqual(['sha256:a']);
  });
});
