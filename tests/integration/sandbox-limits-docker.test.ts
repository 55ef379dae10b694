/**
 * What a sandbox can reach besides CPU, memory, processes and network, on real Docker: the
 * disk (a budget, with a watchdog where the storage cannot enforce a quota), container logs,
 * what the image itself would run (entrypoint, healthcheck, volumes), whose containers the
 * harness acts on, and the freeze at the end of an agent loop.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { mkdtemp, rm, writeFile, mkdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { dockerBackend } from '../../src/sandbox/docker/docker-sandbox.js';
import { dockerEngine } from '../../src/sandbox/docker/engine/index.js';
import { buildRepoImage } from '../../src/sandbox/docker/images/repo-image.js';
import { containerLabels } from '../../src/sandbox/docker/labels.js';
import type { Sandbox } from '../../src/sandbox/types.js';
import { fixtureImage, foreignContainer } from '../helpers/docker.js';

const made: Sandbox[] = [];
const dirs: string[] = [];
afterAll(async () => {
  await Promise.all(made.map((s) => s.dispose().catch(() => undefined)));
  await Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true })));
});

async function make(extra: Parameters<ReturnType<typeof dockerBackend>['create']>[0] | object = {}) {
  const sandbox = await dockerBackend().create({
    image: await fixtureImage('conformance'),
    role: 'limits',
    runId: 'limits-test',
    ...extra,
  });
  made.push(sandbox);
  return sandbox;
}

async function until(condition: () => Promise<boolean>, timeoutMs: number): Promise<boolean> {
  const end = Date.now() + timeoutMs;
  while (Date.now() < end) {
    if (await condition()) return true;
    await new Promise((r) => setTimeout(r, 200));
  }
  return condition();
}

describe('disk budget', () => {
  it('a sandbox that writes past its budget is stopped, and says why on every later call', async () => {
    const sandbox = await make({ resources: { diskBytes: 40 * 1024 * 1024 } });
    // Many files, each under the per-file limit: only a budget on the whole layer stops this.
    await sandbox.exec('i=0; while [ $i -lt 12 ]; do head -c 8M /dev/zero > big$i; i=$((i+1)); done', {
      timeoutMs: 60_000,
    });
    expect(await until(async () => !(await sandbox.isAlive()), 15_000)).toBe(true);
    await expect(sandbox.exec('true')).rejects.toMatchObject({
      code: 'DISK_BUDGET',
      message: expect.stringMatching(/disk budget exceeded \(\d+\.\d MiB of 40\.0 MiB\)/),
    });
  });

  it('a background writer that keeps going is stopped without any further call', async () => {
    const sandbox = await make({ resources: { diskBytes: 40 * 1024 * 1024 } });
    await sandbox.exec(
      '(i=0; while :; do head -c 4M /dev/zero > bg$i; i=$((i+1)); sleep 0.05; done) > /dev/null 2>&1 &',
    );
    expect(await until(async () => !(await sandbox.isAlive()), 20_000)).toBe(true);
    await expect(sandbox.readFile('src/greeting.txt')).rejects.toMatchObject({ code: 'DISK_BUDGET' });
  });
});

describe('what else a container could reach', () => {
  it('keeps no container logs, so writing to pid 1 output grows nothing', async () => {
    const sandbox = await make();
    const details = await dockerEngine().containers.inspect(sandbox.id);
    expect((details?.hostConfig as { LogConfig?: { Type?: string } }).LogConfig?.Type).toBe('none');
    const write = await sandbox.exec('head -c 1M /dev/zero > /proc/1/fd/1; echo $?');
    expect(write.stdout.trim()).not.toBe('');
  });

  it("runs nothing of the image's own: no entrypoint, no healthcheck", async () => {
    const dir = await mkdtemp(join(tmpdir(), 'sandbox-harness-entry-'));
    dirs.push(dir);
    await mkdir(join(dir, 'repo'));
    await writeFile(join(dir, 'repo', 'README.md'), 'x\n');
    await writeFile(
      join(dir, 'repo', 'Dockerfile.sandbox'),
      [
        'ARG BASE_IMAGE=sandbox-harness/base-node:20',
        'FROM ${BASE_IMAGE}',
        'COPY --chown=1000:1000 . /workspace',
        'USER root',
        'RUN printf \'#!/bin/sh\\ntouch /workspace/entrypoint-ran\\nexec "$@"\\n\' > /entry.sh && chmod 755 /entry.sh',
        'USER sandbox',
        'HEALTHCHECK --interval=1s CMD touch /workspace/healthcheck-ran',
        'ENTRYPOINT ["/entry.sh"]',
        '',
      ].join('\n'),
    );
    const image = await buildRepoImage({ repoDir: join(dir, 'repo') });
    const sandbox = await make({ image: image.tag });
    await new Promise((r) => setTimeout(r, 2500));
    const seen = await sandbox.exec('ls /workspace');
    expect(seen.stdout).not.toMatch(/entrypoint-ran|healthcheck-ran/);
    expect((await sandbox.changes()).changes).toEqual([]);
  });

  it('refuses an image that declares volumes (their writes would escape the budget and the scan)', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'sandbox-harness-volume-'));
    dirs.push(dir);
    await mkdir(join(dir, 'repo'));
    await writeFile(join(dir, 'repo', 'README.md'), 'x\n');
    await writeFile(
      join(dir, 'repo', 'Dockerfile.sandbox'),
      'ARG BASE_IMAGE=sandbox-harness/base-node:20\nFROM ${BASE_IMAGE}\nCOPY --chown=1000:1000 . /workspace\nVOLUME /workspace/data\n',
    );
    const image = await buildRepoImage({ repoDir: join(dir, 'repo') });
    await expect(dockerBackend().create({ image: image.tag, role: 'volume' })).rejects.toMatchObject({
      code: 'IMAGE',
      message: expect.stringMatching(/declares volumes \(\/workspace\/data\)/),
    });
  });
});

describe('kept containers are ours', () => {
  it('attach, state and release refuse a container of another run and one this tool did not make', async () => {
    const sandbox = await make({ runId: 'the-real-run' });
    const backend = dockerBackend();
    await expect(backend.attach({ id: sandbox.id, runId: 'a-forged-run' })).rejects.toMatchObject({
      code: 'USAGE',
      message: expect.stringMatching(/is not a sandbox of run a-forged-run/),
    });
    await expect(backend.state({ id: sandbox.id, runId: 'a-forged-run' })).rejects.toMatchObject({
      code: 'USAGE',
    });
    // Labels of its own, not this tool's marks, and never started: attach must not start it.
    const foreign = await foreignContainer(await fixtureImage('conformance'), { start: false });
    try {
      await expect(backend.attach({ id: foreign, runId: 'the-real-run' })).rejects.toMatchObject({
        code: 'USAGE',
      });
      expect((await dockerEngine().containers.inspect(foreign))?.running).toBe(false);
    } finally {
      await dockerEngine().containers.remove(foreign);
    }
    // The marks of a real run are still accepted.
    expect((await backend.state({ id: sandbox.id, runId: 'the-real-run' })).exists).toBe(true);
    expect(containerLabels({ runId: 'x' })['sandbox-harness.run']).toBe('x');
  });
});

describe('freeze', () => {
  it('stops every process the agent left behind, setsid and double-fork included, and the sandbox still works', async () => {
    const sandbox = await make();
    await sandbox.exec(
      '(while :; do date >> ticks.txt; sleep 0.05; done) > /dev/null 2>&1 & setsid sh -c "while :; do sleep 1; done" > /dev/null 2>&1 & (sh -c "sleep 501 &" &) ',
    );
    await new Promise((r) => setTimeout(r, 300));
    await sandbox.freeze();
    const size = async () => (await sandbox.readFile('ticks.txt')).length;
    const first = await size();
    await new Promise((r) => setTimeout(r, 600));
    expect(await size()).toBe(first);
    const procs = await sandbox.exec(
      "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null; echo; done | grep -c -E '[s]leep 501|[w]hile :' || true",
    );
    expect(procs.exitCode).toBe(0);
    expect(procs.stdout.trim()).toBe('0');
    expect((await sandbox.exec('echo alive')).stdout).toBe('alive\n');
  });

  it('a command past its timeout is killed with a child that left its process group', async () => {
    const sandbox = await make();
    const r = await sandbox.exec('setsid sh -c "sleep 401" & sleep 402', { timeoutMs: 2000 });
    expect(r.timedOut).toBe(true);
    const left = await sandbox.exec(
      "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null; echo; done | grep -c '[s]leep 40[12]' || true",
    );
    expect(left.stdout.trim()).toBe('0');
  });
});
