/**
 * Images and engine readiness against the real Docker engine: the base image, repo images
 * cached by content hash, forced rebuilds, build failures, missing images, and `doctor`.
 * The base image may be bootstrapped offline the first time (minutes).
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ImageError } from '../../src/errors.js';
import { doctorExitCode } from '../../src/cli/commands/doctor.js';
import { runDoctor } from '../../src/sandbox/docker/operator/engine-doctor.js';
import { DockerEngine } from '../../src/sandbox/docker/engine/index.js';
import { buildRepoImage } from '../../src/sandbox/docker/images/repo-image.js';
import { ensureBaseImage } from '../../src/sandbox/docker/images/ensure-base.js';
import { inImage, ScratchRepos } from '../helpers/docker.js';
import { until } from '../helpers/poll.js';

const run = promisify(execFile);
const repos = new ScratchRepos('images-it');
const freshRepo = () => repos.fresh();
const build = (repoDir: string, extra?: Parameters<ScratchRepos['build']>[1]) => repos.build(repoDir, extra);

// The first run on a machine without a registry bootstraps the base image from Debian packages (minutes).
beforeAll(() => repos.setUp(), 600_000);
afterAll(() => repos.cleanUp());

describe('base image', () => {
  it('is reused once it exists, without pulling or building', async () => {
    const lines: string[] = [];
    const result = await ensureBaseImage('node', { onLine: (l) => lines.push(l) });
    expect(result).toMatchObject({ tag: 'sandbox-harness/base-node:20', source: 'existing' });
    expect(lines).toEqual([]);
  });

  it('runs as the sandbox user (uid 1000) with Node 20, git and timeout, and root-owned system folders', async () => {
    const out = await inImage(
      'sandbox-harness/base-node:20',
      'id -u; node -p "process.versions.node.split(\\".\\")[0]"; git --version >/dev/null && echo git; command -v timeout; stat -c %U /workspace /usr /etc; touch /usr/x 2>/dev/null || echo usr-readonly',
    );
    expect(out.trim().split('\n')).toEqual([
      '1000',
      '20',
      'git',
      '/usr/bin/timeout',
      'sandbox',
      'root',
      'root',
      'usr-readonly',
    ]);
  });
});

describe('repo images', () => {
  it('does not rebuild an unchanged repo; changing one file does', async () => {
    const repo = await freshRepo();

    const first = await build(repo);
    expect(first.image.reused).toBe(false);
    expect(first.image.tag).toMatch(/^sandbox-harness\/repo-images-it-[0-9a-f]{8}:[0-9a-f]{16}$/);
    expect(first.image.tag.endsWith(first.image.contentHash.slice(0, 16))).toBe(true);
    expect(first.lines.some((l) => /^Step \d+\/\d+ : COPY/.test(l))).toBe(true);

    const second = await build(repo);
    expect(second.image).toMatchObject({ reused: true, tag: first.image.tag, imageId: first.image.imageId });
    expect(second.lines).toEqual([]);

    await writeFile(
      join(repo, 'src/greet.js'),
      'export function greet(name) {\n  return `hi, ${name}`;\n}\n',
    );
    const third = await build(repo);
    expect(third.image.reused).toBe(false);
    expect(third.image.tag).not.toBe(first.image.tag);
    expect(third.image.imageId).not.toBe(first.image.imageId);
    expect(third.lines.length).toBeGreaterThan(0);
    expect(await inImage(third.image.tag, 'cat /workspace/src/greet.js')).toContain('hi, ${name}');
  });

  it('forces a build with rebuild: true, bypassing the layer cache', async () => {
    const repo = await freshRepo();
    const first = await build(repo);
    const forced = await build(repo, { rebuild: true });
    expect(forced.image.reused).toBe(false);
    expect(forced.image.tag).toBe(first.image.tag);
    expect(forced.lines.some((l) => /^Step \d+\/\d+ : COPY/.test(l))).toBe(true);
    expect(forced.lines.some((l) => l.includes('Using cache'))).toBe(false);
  });

  it('bakes the repo into /workspace owned by the sandbox user, without secrets or the injected Dockerfile', async () => {
    const repo = await freshRepo();
    await writeFile(join(repo, '.env'), 'FIXTURE_TOKEN=not-a-real-secret\n');
    await writeFile(join(repo, 'debug.log'), 'ignored by the fixture .dockerignore\n');
    const { image } = await build(repo);
    expect([...image.hostFiles.keys()].sort()).toEqual(
      ['.dockerignore', 'README.md', 'package.json', 'src/greet.js', 'src/greet.test.js'].sort(),
    );
    const listing = await inImage(
      image.tag,
      'cd /workspace && find . -type f | sort && stat -c %u:%g . src/greet.js && id -u',
    );
    expect(listing.trim().split('\n')).toEqual([
      './.dockerignore',
      './README.md',
      './package.json',
      './src/greet.js',
      './src/greet.test.js',
      '1000:1000',
      '1000:1000',
      '1000',
    ]);
    expect(await inImage(image.tag, 'cd /workspace && node --test 2>&1 | grep -c "^# pass 1"')).toBe('1\n');
  });

  it('reports a failing Dockerfile as an ImageError naming the failing step with its last lines, and leaves no container behind', async () => {
    const repo = await freshRepo();
    const marker = `marker-${randomBytes(4).toString('hex')}`;
    await writeFile(
      join(repo, 'Dockerfile.sandbox'),
      [
        'ARG BASE_IMAGE',
        'FROM ${BASE_IMAGE}',
        'COPY --chown=1000:1000 . /workspace',
        `RUN echo "${marker} before the failure" && for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25; do echo "${marker} line $i"; done && exit 3`,
        'RUN echo never-reached',
        '',
      ].join('\n'),
    );

    const error = await buildRepoImage({ repoDir: repo }).then(
      () => undefined,
      (e: unknown) => e,
    );

    expect(error).toBeInstanceOf(ImageError);
    const message = (error as ImageError).message;
    expect(message).toMatch(/failed at Step 4\/\d+ : RUN echo "marker-/);
    expect(message).toMatch(/the command of that step exited with code 3/);
    expect(message).toContain(`${marker} line 25`);
    expect(message).not.toContain(`${marker} line 5\n`);
    const logFile = /full log: (\S+)/.exec(message)?.[1];
    expect(logFile).toBeDefined();
    expect(await readFile(logFile ?? '', 'utf8')).toContain(`${marker} before the failure`);
    expect((error as ImageError).hint).toContain('Dockerfile.sandbox');

    const { stdout } = await run('docker', ['ps', '-a', '--no-trunc', '--format', '{{.Command}}']);
    expect(stdout).not.toContain(marker);
  });

  it('stops a running build when interrupted, without waiting for it and leaving no container', async () => {
    const repo = await freshRepo();
    const marker = `slow-${randomBytes(4).toString('hex')}`;
    await writeFile(
      join(repo, 'Dockerfile.sandbox'),
      ['ARG BASE_IMAGE', 'FROM ${BASE_IMAGE}', `RUN echo ${marker} && sleep 120`, ''].join('\n'),
    );
    const controller = new AbortController();
    const lines: string[] = [];
    const started = Date.now();
    const pending = buildRepoImage({
      repoDir: repo,
      signal: controller.signal,
      onProgress: (line) => {
        lines.push(line);
        if (line.includes(marker) && !line.includes('RUN')) controller.abort();
      },
    }).then(
      () => undefined,
      (e: unknown) => e,
    );
    const error = await pending;
    expect(error).toMatchObject({ code: 'INTERRUPTED' });
    expect(Date.now() - started).toBeLessThan(60_000);
    // The daemon cancels the build when the request goes away; its container goes with it.
    await until(
      async () =>
        !(await run('docker', ['ps', '-a', '--no-trunc', '--format', '{{.Command}}'])).stdout.includes(
          marker,
        ),
      "the build's container is gone",
      { timeoutMs: 10_000, intervalMs: 200 },
    );
  });

  it('gives a short ImageError for a base image that does not exist', async () => {
    const repo = await freshRepo();
    const error = await buildRepoImage({ repoDir: repo, baseImage: 'sandbox-harness/no-such-base:404' }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(ImageError);
    const { message, hint } = error as ImageError;
    expect(message).toMatch(
      /^base image sandbox-harness\/no-such-base:404 does not exist here and cannot be pulled/,
    );
    expect(message.split('\n')).toHaveLength(1);
    expect(hint).toMatch(/docker pull sandbox-harness\/no-such-base:404/);
  });
});

describe('doctor', () => {
  it('finds a working engine usable, starts a hardened container and leaves none behind', async () => {
    const report = await runDoctor();
    const byName = new Map(report.checks.map((c) => [c.name, c]));
    expect(report.usable).toBe(true);
    expect(byName.get('daemon')).toMatchObject({
      ok: true,
      detail: expect.stringContaining(report.endpoint),
    });
    expect(byName.get('sandbox-container')).toMatchObject({
      ok: true,
      detail: expect.stringContaining('--network none'),
    });
    expect(byName.get('base-images')?.detail).toContain('sandbox-harness/base-node:20');
    // Only xfs mounted with pquota gives overlay2 a per-container quota; anywhere else the
    // watchdog holds the budget, and doctor must say so rather than promise the engine does.
    const { stdout: driverStatus } = await run('docker', ['info', '--format', '{{json .DriverStatus}}']);
    const backing = new Map(JSON.parse(driverStatus) as [string, string][]).get('Backing Filesystem');
    expect(byName.get('disk-budget')).toMatchObject({
      ok: true,
      detail:
        backing === 'xfs'
          ? expect.stringMatching(/^held by /)
          : expect.stringMatching(/^held by the harness's watchdog/),
    });
    // A check that is missing altogether fails here too: its detail must be present and say something.
    for (const name of ['server-version', 'storage-driver', 'cgroups'])
      expect(byName.get(name)?.detail, name).toMatch(/\S/);
    expect(doctorExitCode(report)).toBe(report.ok ? 0 : 1);
    // Only this process's doctor containers: other runs on the same engine may be mid-check.
    const { stdout } = await run('docker', [
      'ps',
      '-a',
      '-q',
      '--filter',
      'label=sandbox-harness.role=doctor',
      '--filter',
      `label=sandbox-harness.owner-pid=${process.pid}`,
    ]);
    expect(stdout.trim()).toBe('');
  });

  it('reports an unreachable daemon with its endpoint and a fix, and exit code 3', async () => {
    const saved = process.env.DOCKER_HOST;
    const endpoint = `unix://${join(repos.scratch, 'no-daemon.sock')}`;
    process.env.DOCKER_HOST = endpoint;
    try {
      const report = await runDoctor({ engine: new DockerEngine() });
      expect(report).toMatchObject({ ok: false, usable: false, endpoint });
      expect(report.checks).toHaveLength(1);
      expect(report.checks[0]).toMatchObject({ name: 'daemon', ok: false, fatal: true });
      expect(report.checks[0]?.detail).toContain(endpoint);
      expect(report.checks[0]?.fix).toContain('DOCKER_HOST');
      expect(doctorExitCode(report)).toBe(3);
    } finally {
      if (saved === undefined) delete process.env.DOCKER_HOST;
      else process.env.DOCKER_HOST = saved;
    }
  });
});
