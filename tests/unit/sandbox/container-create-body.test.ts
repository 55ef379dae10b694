/**
 * What the Docker backend sends the engine to create a container, byte for byte: the request
 * body of `POST /containers/create` for every kind of container it makes, recorded by a fake
 * engine on loopback and compared with the snapshots beside this file. A change of the
 * hardening on the wire shows up here as a diff, whatever code it came from.
 */
import { hardenedContainer, IDLE_CONTAINER_LIMITS } from '../../../src/sandbox/container/container-spec.js';
import { stringify } from 'node:querystring';
import { format } from 'prettier';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { DockerBackend } from '../../../src/sandbox/docker/docker-sandbox.js';
import { DockerEngine } from '../../../src/sandbox/docker/engine/index.js';
import { containerLabels } from '../../../src/sandbox/docker/labels.js';
import { imageJson, json, startFakeEngine, type FakeEngineServer } from '../../helpers/fake-engine-server.js';

/** Labels and names that change per process and per call made constant, laid out as the repo's JSON is. */
async function normalized(body: Buffer): Promise<string> {
  const parsed = JSON.parse(body.toString('utf8')) as { name?: string; Labels?: Record<string, string> };
  if (parsed.name) parsed.name = parsed.name.replace(/-[0-9a-f]{6}$/, '-<random>');
  for (const key of [
    'sandbox-harness.created',
    'sandbox-harness.session',
    'sandbox-harness.owner-pid',
    'sandbox-harness.owner-host',
  ]) {
    if (parsed.Labels?.[key] !== undefined) parsed.Labels[key] = `<${key}>`;
  }
  return format(JSON.stringify(parsed), { parser: 'json' });
}

/**
 * The create requests, each checked to carry in its query exactly what its body says (the
 * client repeats the body there, objects as JSON): the body then pins the whole request.
 */
function creates(server: FakeEngineServer) {
  const found = server.requests.filter((r) => r.method === 'POST' && r.url.startsWith('/containers/create'));
  for (const request of found) {
    const body = JSON.parse(request.body.toString('utf8')) as Record<string, unknown>;
    const asQuery = Object.fromEntries(
      Object.entries(body).map(([k, v]) => [
        k,
        typeof v === 'object' && v !== null && !Array.isArray(v) ? JSON.stringify(v) : v,
      ]),
    ) as Record<string, string | string[]>;
    expect(request.url).toBe(`/containers/create?${stringify(asQuery)}`);
  }
  return found;
}

const CATALOG = { path: '/etc/sandbox-harness/catalog.yaml', content: 'service: demo\n' };

let server: FakeEngineServer;
let engine: DockerEngine;

beforeEach(async () => {
  server = await startFakeEngine();
  engine = new DockerEngine({ transport: 'tcp', host: '127.0.0.1', port: server.port });
});
afterEach(async () => {
  await server.close();
});

describe('the create request of each container the Docker backend makes', () => {
  it('a sandbox with every default limit and a disk quota the engine holds', async () => {
    server.images.set('repo:1', imageJson('sha256:aaaa', ['repo:1']));
    const backend = new DockerBackend(engine, 'fake', false);
    const sandbox = await backend.create({
      image: 'repo:1',
      runId: 'run-1',
      role: 'attempt-1',
      env: { SERVICE_CATALOG: '/etc/sandbox-harness/catalog.yaml', FOO: 'bar baz' },
      files: [CATALOG],
      keep: 'on-failure',
    });
    await sandbox.dispose();
    const [create] = creates(server);
    expect(JSON.parse(create!.body.toString()).name).toMatch(/^sandbox-harness-run-1-attempt-1-[0-9a-f]{6}$/);
    await expect(await normalized(create!.body)).toMatchFileSnapshot('./__snapshots__/create-sandbox.json');
  });

  it('a sandbox under gVisor on an engine without a disk quota (the create is tried again without one)', async () => {
    server.images.set('repo:1', imageJson('sha256:aaaa', ['repo:1']));
    server.info.Runtimes = { runc: { path: 'runc' }, runsc: { path: '/usr/bin/runsc' } };
    let refused = false;
    await server.close();
    server = await startFakeEngine((req, body, res) => {
      if (req.url?.startsWith('/containers/create') && !refused && body.includes('StorageOpt')) {
        refused = true;
        return json(res, 500, {
          message: "--storage-opt is supported only for overlay over xfs with 'pquota' mount option",
        });
      }
    });
    server.images.set('repo:1', imageJson('sha256:aaaa', ['repo:1']));
    server.info.Runtimes = { runc: { path: 'runc' }, runsc: { path: '/usr/bin/runsc' } };
    engine = new DockerEngine({ transport: 'tcp', host: '127.0.0.1', port: server.port });
    const backend = new DockerBackend(engine, 'fake', false);
    const sandbox = await backend.create({
      image: 'repo:1',
      runtime: 'runsc',
      resources: {
        memoryBytes: 512 * 1024 ** 2,
        cpus: 1.5,
        pids: 64,
        maxFileBytes: 1024 ** 2,
        tmpfsBytes: 8 * 1024 ** 2,
      },
    });
    await sandbox.dispose();
    const [first, second] = creates(server);
    expect(first!.body.toString()).toContain('"StorageOpt"');
    expect(backend.diskBudgetMode()).toBe('watchdog');
    await expect(await normalized(second!.body)).toMatchFileSnapshot(
      './__snapshots__/create-sandbox-runsc-no-quota.json',
    );
  });

  it('a container on an egress network', async () => {
    await engine.containers.create(
      hardenedContainer({
        name: 'sandbox-harness-adhoc-sandbox-abcdef',
        image: 'repo:1',
        entrypoint: ['sleep'],
        cmd: ['infinity'],
        user: '0:0',
        workingDir: '/workspace',
        env: ['HOME=/home/sandbox', 'HTTP_PROXY=http://10.213.0.1:3128'],
        labels: containerLabels({ runId: 'run-2' }),
        memoryBytes: 1024 ** 3,
        nanoCpus: 1e9,
        pids: 256,
        maxFileBytes: 64 * 1024 ** 2,
        tmpfsBytes: 256 * 1024 ** 2,
        nofile: 4096,
        diskBytes: 1024 ** 3,
        network: { name: 'sandbox-harness-adhoc-sandbox-abcdef-shbr0123456789ab', dns: ['10.213.0.1'] },
      }),
    );
    await expect(await normalized(creates(server)[0]!.body)).toMatchFileSnapshot(
      './__snapshots__/create-egress.json',
    );
  });

  it('an idle container (the pristine tree, a probe)', async () => {
    await engine.containers.create(
      hardenedContainer({
        name: 'sandbox-harness-adhoc-tree-abcdef',
        image: 'repo:1',
        entrypoint: ['true'],
        cmd: [],
        user: '1000:1000',
        workingDir: '/',
        env: [],
        labels: containerLabels({ role: 'tree' }),
        ...IDLE_CONTAINER_LIMITS,
      }),
    );
    await expect(await normalized(creates(server)[0]!.body)).toMatchFileSnapshot(
      './__snapshots__/create-idle.json',
    );
  });
});
