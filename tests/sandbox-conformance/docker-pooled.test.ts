/**
 * The sandbox contract on sandboxes handed out by the warm pool (local Docker engine, runc):
 * every sandbox the suite makes was warmed ahead and proven pristine before it was handed out,
 * so what the suite pins for a cold sandbox holds for a pooled one too.
 */
import { afterAll, expect } from 'vitest';
import { DockerBackend } from '../../src/sandbox/docker/docker-sandbox.js';
import { dockerEngine } from '../../src/sandbox/docker/engine/index.js';
import { LABEL } from '../../src/sandbox/docker/labels.js';
import { WarmPool } from '../../src/sandbox/pool/warm-pool.js';
import type { SandboxBackend, SandboxSpec } from '../../src/sandbox/types.js';
import { fixtureImage } from '../helpers/docker.js';
import { describeSandboxConformance } from './conformance.js';
import { bridgeAddress, connectFromNetworked } from './docker-targets.js';

const engine = dockerEngine();
const pool = new WarmPool(new DockerBackend(engine), { capacity: 8 });
/** The pool, asked to warm each spec just before the suite asks for it: every sandbox is a pooled one. */
const pooled = new Proxy(pool, {
  get(target, key, receiver) {
    if (key === 'create')
      return async (spec: SandboxSpec) => {
        target.warm(spec);
        return target.create(spec);
      };
    const value: unknown = Reflect.get(target, key, receiver);
    return typeof value === 'function' ? value.bind(target) : value;
  },
}) as SandboxBackend;

afterAll(async () => {
  await pool.drain();
  // Every sandbox came from the pool; the only cold ones are those the suite asks for to fail
  // (a missing image: the warm failed the same way, and the create says so again).
  const failed = pool.discards.filter((why) => why.startsWith('failed to start')).length;
  expect(pool.discards.filter((why) => !why.startsWith('failed to start') && why !== 'drained')).toEqual([]);
  expect(pool.stats()).toMatchObject({ cold: failed, ready: 0, starting: 0 });
  expect(pool.stats().handedOut).toBeGreaterThan(0);
});

describeSandboxConformance({
  name: 'docker, from the warm pool',
  backend: () => pooled,
  image: () => fixtureImage('conformance'),
  reportedEnv: async (sandbox) => (await engine.containers.inspect(sandbox.id))?.env ?? [],
  network: { hostAddress: bridgeAddress, connectFromNetworked },
  exists: async (id) => (await engine.containers.inspect(id)) !== undefined,
  sandboxesOfRun: async (runId) => (await engine.containers.list({ [LABEL.run]: runId })).map((c) => c.id),
});
