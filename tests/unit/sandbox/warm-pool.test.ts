/**
 * The warm pool's rules against a fake backend: same spec only, pristine proven, never handed
 * out twice, stale images refused, drained to nothing. The Docker tests prove the same on a
 * real engine (tests/integration/warm-pool.test.ts).
 */
import { describe, expect, it } from 'vitest';
import { WarmPool, poolCapacity, poolKey } from '../../../src/sandbox/pool/warm-pool.js';
import type { ChangeScan, Sandbox, SandboxBackend, SandboxSpec } from '../../../src/sandbox/types.js';

interface FakeBox {
  id: string;
  spec: SandboxSpec;
  changed: boolean;
  alive: boolean;
  disposed: boolean;
}

function fakeBackend(): { backend: SandboxBackend; boxes: FakeBox[]; images: Map<string, string> } {
  const boxes: FakeBox[] = [];
  const images = new Map<string, string>([['img', 'sha256:one']]);
  const backend = {
    name: 'fake',
    engine: 'local',
    imageId: async (image: string) => images.get(image),
    create: async (spec: SandboxSpec): Promise<Sandbox> => {
      const box: FakeBox = { id: `box-${boxes.length}`, spec, changed: false, alive: true, disposed: false };
      boxes.push(box);
      return {
        id: box.id,
        image: spec.image,
        labels: {},
        exec: async () => ({
          exitCode: 0,
          stdout: '',
          stderr: '',
          timedOut: false,
          truncated: false,
          durationMs: 0,
        }),
        changes: async (): Promise<ChangeScan> => ({
          changes: box.changed ? [{ path: 'a.txt', kind: 'added' }] : [],
          complete: true,
        }),
        isAlive: async () => box.alive,
        dispose: async () => {
          box.disposed = true;
        },
      } as unknown as Sandbox;
    },
  } as unknown as SandboxBackend;
  return { backend, boxes, images };
}

const spec: SandboxSpec = { image: 'img', runId: 'r1', role: 'attempt-1' };

describe('warm pool', () => {
  it('hands a warmed sandbox to a create of the same spec, once', async () => {
    const { backend, boxes } = fakeBackend();
    const pool = new WarmPool(backend, { capacity: 4 });
    pool.warm(spec);
    const first = await pool.create({ role: 'attempt-1', runId: 'r1', image: 'img' });
    expect(first.id).toBe('box-0');
    const second = await pool.create(spec);
    expect(second.id).toBe('box-1');
    expect(boxes).toHaveLength(2);
    expect(pool.stats()).toMatchObject({ handedOut: 1, cold: 1, ready: 0, starting: 0 });
  });

  it('never hands a sandbox to a spec that differs in anything', async () => {
    const variants: Partial<SandboxSpec>[] = [
      { role: 'verify-1' },
      { runId: 'r2' },
      { runtime: 'runsc' },
      { resources: { memoryBytes: 1 } },
      { env: { A: '1' } },
      { keep: 'always' },
      { hidden: ['tests/x'] },
      { files: [{ path: '/etc/x', content: Buffer.from('y') }] },
      { egress: { allow: ['example.com'] } as unknown as NonNullable<SandboxSpec['egress']> },
      { image: 'other' },
    ];
    for (const variant of variants) {
      const { backend, boxes } = fakeBackend();
      const pool = new WarmPool(backend, { capacity: 4 });
      pool.warm(spec);
      const asked = { ...spec, ...variant };
      const got = await pool.create(asked);
      expect(boxes.find((b) => b.id === got.id)?.spec, JSON.stringify(variant)).toEqual(asked);
      expect(pool.stats(), JSON.stringify(variant)).toMatchObject({ handedOut: 0, cold: 1 });
      await pool.drain();
    }
    expect(poolKey({ ...spec, files: [{ path: '/a', content: 'x' }] })).not.toBe(
      poolKey({ ...spec, files: [{ path: '/a', content: 'y' }] }),
    );
  });

  it('refuses a used, stale or dead sandbox and makes one cold instead', async () => {
    for (const spoil of ['used', 'stale', 'dead'] as const) {
      const { backend, boxes, images } = fakeBackend();
      const pool = new WarmPool(backend, { capacity: 4 });
      pool.warm(spec);
      await new Promise((r) => setTimeout(r, 0));
      if (spoil === 'used') boxes[0]!.changed = true;
      if (spoil === 'stale') images.set('img', 'sha256:two');
      if (spoil === 'dead') boxes[0]!.alive = false;
      const got = await pool.create(spec);
      expect(got.id, spoil).toBe('box-1');
      expect(boxes[0]!.disposed, spoil).toBe(true);
      expect(pool.stats()).toMatchObject({ handedOut: 0, cold: 1, discarded: 1 });
    }
  });

  it('keeps within its capacity, and drains everything, including what is still starting', async () => {
    const { backend, boxes } = fakeBackend();
    const pool = new WarmPool(backend, { capacity: 2 });
    pool.warm(spec, 5);
    expect(pool.stats().starting).toBe(2);
    await pool.drain();
    expect(boxes.map((b) => b.disposed)).toEqual([true, true]);
    expect(pool.stats()).toMatchObject({ ready: 0, starting: 0, discarded: 2 });
    pool.warm(spec);
    expect(pool.stats().starting).toBe(0);
  });

  it('a sandbox that fails to start is discarded, and the create makes one cold', async () => {
    const { backend } = fakeBackend();
    let fail = true;
    const real = backend.create.bind(backend);
    backend.create = async (s) => {
      if (fail) {
        fail = false;
        throw new Error('engine said no');
      }
      return real(s);
    };
    const pool = new WarmPool(backend, { capacity: 2 });
    pool.warm(spec);
    const got = await pool.create(spec);
    expect(got.id).toBe('box-0');
    expect(pool.discards[0]).toMatch(/engine said no/);
  });

  it('is sized from the concurrency and the attempts', () => {
    expect(poolCapacity(1, 1)).toBe(2);
    expect(poolCapacity(2, 3)).toBe(8);
    expect(poolCapacity(50, 3)).toBe(16);
  });
});
