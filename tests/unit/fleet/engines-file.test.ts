import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ConfigError, UsageError } from '../../../src/errors.js';
import {
  loadEnginesFile,
  resolveEngines,
  resolveStoredEngine,
} from '../../../src/sandbox/docker/fleet/engines-file.js';
import { contextId, describeEndpoint } from '../../../src/sandbox/docker/engine/endpoint.js';

const HOST_KEY = 'AAAAC3NzaC1lZDI1NTE5AAAAIJZKOkoU4T0kFRbMTuXxLXbM4dnpYHsgCHMHnL9kOc67';

let dir: string;
let env: NodeJS.ProcessEnv;

beforeEach(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'engines-file-'));
  env = { HOME: path.join(dir, 'home') };
  await mkdir(path.join(dir, 'certs'), { recursive: true });
  for (const part of ['ca', 'cert', 'key']) await writeFile(path.join(dir, 'certs', `${part}.pem`), part);
  const meta = path.join(dir, 'home', '.docker', 'contexts', 'meta', contextId('build-box'));
  await mkdir(meta, { recursive: true });
  await writeFile(
    path.join(meta, 'meta.json'),
    JSON.stringify({ Name: 'build-box', Endpoints: { docker: { Host: 'unix:///run/build-box.sock' } } }),
  );
  await mkdir(path.join(dir, 'home', '.ssh'));
  await writeFile(path.join(dir, 'home', '.ssh', 'known_hosts'), `runner-3 ssh-ed25519 ${HOST_KEY}\n`);
  await writeFile(path.join(dir, 'home', '.ssh', 'id_ed25519'), 'PRIVATE');
});

afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function load(text: string) {
  await writeFile(path.join(dir, 'engines.yaml'), text);
  return loadEnginesFile('engines.yaml', { cwd: dir, env });
}

async function problems(text: string): Promise<string[]> {
  const error = await load(text).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(ConfigError);
  return (error as ConfigError).problems;
}

describe('engines.yaml names engines the ways users already have', () => {
  it('reads contexts, tcp hosts with TLS files relative to the file, ssh URLs, names and capacities', async () => {
    const specs = await load(`engines:
  - context: default
    capacity: 2
  - context: build-box
  - name: gpu-1
    host: tcp://10.0.0.5:2376
    tls: { ca: certs/ca.pem, cert: certs/cert.pem, key: certs/key.pem }
    capacity: 8
  - host: ssh://ci@runner-3
    identityFile: ~/.ssh/id_ed25519
`);
    expect(specs.map((s) => [s.name, describeEndpoint(s.endpoint), s.capacity, s.origin])).toEqual([
      ['default', 'unix:///var/run/docker.sock', 2, 'engines.yaml:2:5'],
      ['build-box', 'unix:///run/build-box.sock', undefined, 'engines.yaml:4:5'],
      ['gpu-1', 'tcp://10.0.0.5:2376 (TLS)', 8, 'engines.yaml:5:5'],
      ['runner-3', 'ssh://ci@runner-3:22', undefined, 'engines.yaml:9:5'],
    ]);
    const gpu = specs[2]?.endpoint;
    expect(gpu?.transport === 'tcp' && gpu.tls?.files.cert).toBe(path.join(dir, 'certs', 'cert.pem'));
    const ssh = specs[3]?.endpoint;
    expect(ssh?.transport === 'ssh' && ssh.ssh.privateKey?.toString()).toBe('PRIVATE');
  });

  it('reports every schema problem at once, each with file:line:col, path, expectation and what was found', async () => {
    expect(
      await problems(`engines:
  - context: a
    host: tcp://10.0.0.5:2376
  - name: bad name!
    context: b
  - capacity: 0
    context: c
  - host: ssh://ci@runner-3
    tls: { ca: x, cert: y, key: z }
  - context: d
    capcity: 3
`),
    ).toEqual([
      'engines.yaml:2:5 engines[0]: an engine is either `context: NAME` or `host: URL`, exactly one of them',
      'engines.yaml:4:11 engines[1].name: expected a name of letters, digits, ".", "_" or "-" (at most 63), got "bad name!"',
      'engines.yaml:6:15 engines[2].capacity: expected at least 1 trial at once, got 0',
      'engines.yaml:9:10 engines[3].tls: `tls:` is only for tcp:// hosts',
      'engines.yaml:11:5 engines[4].capcity: unknown key (did you mean "capacity"?); known keys here: name, context, host, tls, identityFile, capacity',
    ]);
  });

  it('reports engines that cannot be resolved at their lines: missing TLS files, unknown contexts, refused endpoints', async () => {
    const found = await problems(`engines:
  - host: tcp://10.0.0.5:2376
    tls: { ca: certs/ca.pem, cert: certs/missing.pem, key: certs/key.pem }
  - context: nowhere
  - host: tcp://10.0.0.6:2375
`);
    expect(found).toHaveLength(3);
    expect(found[0]).toBe(
      `engines.yaml:3:10 engines[0].tls: cannot read TLS file ${path.join(dir, 'certs', 'missing.pem')}: ENOENT`,
    );
    expect(found[1]).toMatch(
      /^engines\.yaml:4:14 engines\[1\]\.context: no docker context named "nowhere" .*Known contexts: default, build-box/,
    );
    expect(found[2]).toMatch(
      /^engines\.yaml:5:11 engines\[2\]\.host: host tcp:\/\/10\.0\.0\.6:2375: 10\.0\.0\.6:2375 without TLS is refused/,
    );
  });

  it('never takes TLS files from the environment for a host the file lists without tls:', async () => {
    const found = await problems(`engines:\n  - host: tcp://10.0.0.5:2376\n`);
    expect(found[0]).toMatch(/without TLS is refused/);
    env.DOCKER_CERT_PATH = path.join(dir, 'certs');
    expect((await problems(`engines:\n  - host: tcp://10.0.0.5:2376\n`))[0]).toMatch(
      /without TLS is refused/,
    );
  });

  it('refuses an empty list and a file that is not there', async () => {
    expect(await problems('engines: []\n')).toEqual([
      'engines.yaml:1:10 engines: expected at least one engine, got an empty list',
    ]);
    const error = await loadEnginesFile('absent.yaml', { cwd: dir, env }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect((error as ConfigError).message).toBe('engines file not found: absent.yaml');
  });
});

describe('resolveEngines combines the file and --engine', () => {
  it('is the local engine alone when nothing is named', async () => {
    const specs = await resolveEngines({ cwd: dir, env });
    expect(specs).toEqual([
      {
        name: 'local',
        endpoint: { transport: 'unix', socketPath: '/var/run/docker.sock' },
        origin: 'the local engine (default)',
      },
    ]);
  });

  it('appends --engine values (context names or URLs) after the file entries', async () => {
    await writeFile(path.join(dir, 'engines.yaml'), 'engines:\n  - context: build-box\n');
    const specs = await resolveEngines({
      file: 'engines.yaml',
      refs: ['default', 'unix:///run/third.sock'],
      cwd: dir,
      env,
    });
    expect(specs.map((s) => [s.name, s.origin])).toEqual([
      ['build-box', 'engines.yaml:2:5'],
      ['default', '--engine default'],
      ['local', '--engine unix:///run/third.sock'],
    ]);
  });

  it('refuses two engines with one name, and one engine listed twice (its capacity would count twice)', async () => {
    await writeFile(path.join(dir, 'engines.yaml'), 'engines:\n  - context: build-box\n');
    await expect(
      resolveEngines({ file: 'engines.yaml', refs: ['build-box'], cwd: dir, env }),
    ).rejects.toThrow('two engines are named build-box: engines.yaml:2:5 and --engine build-box');
    await expect(
      resolveEngines({ refs: ['default', 'unix:///var/run/docker.sock'], cwd: dir, env }),
    ).rejects.toThrow(/--engine default and --engine unix:\/\/\/var\/run\/docker.sock are the same engine/);
  });

  it('reports a bad --engine value as a usage error naming the flag', async () => {
    const error = await resolveEngines({ refs: ['tcp://10.0.0.5:2375'], cwd: dir, env }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(UsageError);
    expect((error as UsageError).message).toMatch(
      /^--engine tcp:\/\/10\.0\.0\.5:2375: 10\.0\.0\.5:2375 without TLS is refused/,
    );
  });
});

describe('an engine can be found again from what a run record keeps', () => {
  it('keeps for each engine a reference without secrets: the file entry, the context or the URL', async () => {
    await writeFile(
      path.join(dir, 'engines.yaml'),
      'engines:\n  - name: gpu-1\n    host: tcp://10.0.0.5:2376\n    tls: { ca: certs/ca.pem, cert: certs/cert.pem, key: certs/key.pem }\n',
    );
    const specs = await resolveEngines({
      file: 'engines.yaml',
      refs: ['build-box', 'ssh://ci@runner-3'],
      cwd: dir,
      env,
    });
    // Each names its backend: a run record keeps it as it is, and reads it back through that backend.
    expect(specs.map((s) => s.ref)).toEqual([
      { backend: 'docker', file: path.join(dir, 'engines.yaml'), entry: 'gpu-1' },
      { backend: 'docker', context: 'build-box' },
      { backend: 'docker', url: 'ssh://ci@runner-3' },
    ]);
    expect(JSON.stringify(specs.map((s) => s.ref))).not.toMatch(/PRIVATE|cert\b|key\b/);
    // The local engine used by default needs none.
    expect((await resolveEngines({ cwd: dir, env }))[0]?.ref).toBeUndefined();
  });

  it('resolves each kind of reference to the same engine, keys read again from where they are kept', async () => {
    await writeFile(
      path.join(dir, 'engines.yaml'),
      'engines:\n  - name: gpu-1\n    host: tcp://10.0.0.5:2376\n    tls: { ca: certs/ca.pem, cert: certs/cert.pem, key: certs/key.pem }\n',
    );
    const fromFile = await resolveStoredEngine(
      { file: path.join(dir, 'engines.yaml'), entry: 'gpu-1' },
      { env },
    );
    expect([fromFile.name, describeEndpoint(fromFile.endpoint)]).toEqual([
      'gpu-1',
      'tcp://10.0.0.5:2376 (TLS)',
    ]);
    expect(fromFile.endpoint.transport === 'tcp' && fromFile.endpoint.tls?.key.toString()).toBe('key');
    const context = await resolveStoredEngine({ context: 'build-box' }, { env });
    expect([context.name, describeEndpoint(context.endpoint)]).toEqual([
      'build-box',
      'unix:///run/build-box.sock',
    ]);
    const url = await resolveStoredEngine({ url: 'ssh://ci@runner-3' }, { env });
    expect([url.name, describeEndpoint(url.endpoint)]).toEqual(['runner-3', 'ssh://ci@runner-3:22']);
  });

  it('says so when the engines file no longer lists the engine', async () => {
    await writeFile(path.join(dir, 'engines.yaml'), 'engines:\n  - context: build-box\n');
    await expect(
      resolveStoredEngine({ file: path.join(dir, 'engines.yaml'), entry: 'gpu-1' }, { env }),
    ).rejects.toThrow(/engines\.yaml no longer lists an engine named gpu-1 \(it has build-box\)/);
  });
});
