/**
 * The `slurm` backend without a cluster: the end record that carries a step's exit code
 * in-band (and srun's own exit line taken off), a controller that does not answer (exit 3 with
 * what to do, nothing left submitted), the exit hook that cancels what a dying harness still
 * holds, and the flags that choose the backend. The real cluster runs in
 * tests/sandbox-conformance/slurm.test.ts.
 */
import { chmod, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { backendChoice } from '../../../src/cli/shared-options.js';
import { SandboxUnavailable, UsageError } from '../../../src/errors.js';
import { cancelLiveJobsSync, SlurmBackend } from '../../../src/sandbox/slurm/slurm-sandbox.js';
import { RecordFilter } from '../../../src/sandbox/slurm/srun-transport.js';

class Collect extends Writable {
  chunks: Buffer[] = [];
  override _write(chunk: Buffer, _e: BufferEncoding, cb: () => void): void {
    this.chunks.push(chunk);
    cb();
  }
  text(): string {
    return Buffer.concat(this.chunks).toString('latin1');
  }
}

async function filtered(parts: string[], token = 'abc123abc123'): Promise<{ code?: number; text: string }> {
  const sink = new Collect();
  const filter = new RecordFilter(sink, token);
  for (const part of parts) filter.write(Buffer.from(part, 'latin1'));
  await new Promise((r) => setImmediate(r));
  filter.finish();
  return { ...(filter.code !== undefined ? { code: filter.code } : {}), text: sink.text() };
}

describe('the end record of a step', () => {
  it('takes the record off stderr and keeps its exit code, whatever the chunking', async () => {
    const big = 'x'.repeat(10_000);
    expect(await filtered([`${big}err\n\x1eSHX abc1`, '23abc123 7\x1e'])).toEqual({
      code: 7,
      text: `${big}err\n`,
    });
  });

  it("takes off srun's own exit line, before or after the record, and nothing else", async () => {
    const line = 'srun: error: node1: task 0: Exited with exit code 7\n';
    expect(await filtered([`${line}err\n\x1eSHX abc123abc123 7\x1e`])).toEqual({ code: 7, text: 'err\n' });
    expect(await filtered([`err\n\x1eSHX abc123abc123 7\x1e${line}`])).toEqual({ code: 7, text: 'err\n' });
    expect(await filtered([`keep me\n\x1eSHX abc123abc123 0\x1e`])).toEqual({ code: 0, text: 'keep me\n' });
  });

  it("passes a long-lived step's bytes on as they come, holding back only what may be the record", async () => {
    // The command channel: one step for many commands, each ended by a marker on stderr that
    // the host waits for; a fixed held-back tail kept them until the host gave the command up.
    const sink = new Collect();
    const filter = new RecordFilter(sink, 'abc123abc123');
    filter.write(Buffer.from('aGk=\0SHX 0123456789ab 0\0', 'latin1'));
    await new Promise((r) => setImmediate(r));
    expect(sink.text()).toBe('aGk=\0SHX 0123456789ab 0\0');
    // A chunk that ends partway into the record, or into a line of srun's: that part waits.
    filter.write(Buffer.from('more\x1eSH', 'latin1'));
    await new Promise((r) => setImmediate(r));
    expect(sink.text()).toBe('aGk=\0SHX 0123456789ab 0\0more');
    filter.write(
      Buffer.from('X abc123abc123 3\x1e\nsrun: error: node1: task 0: Exited with exit code 3\n', 'latin1'),
    );
    await new Promise((r) => setImmediate(r));
    filter.finish();
    expect(filter.code).toBe(3);
    expect(sink.text()).toBe('aGk=\0SHX 0123456789ab 0\0more\n');
  });

  it('without the record (a node lost mid-step, srun exiting 0) there is no exit code', async () => {
    expect(await filtered(['srun: error: Node failure on node1\n'])).toEqual({
      text: 'srun: error: Node failure on node1\n',
    });
    // A record with another token is the command's own bytes, not the step's end.
    expect((await filtered(['\x1eSHX ffffffffffff 0\x1e'])).code).toBeUndefined();
  });
});

describe('a controller that does not answer', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'slurm-fake-'));
    await writeFile(join(dir, 'slurm.conf'), 'ClusterName=fake\n');
    // Fake clients: sbatch cannot reach the controller; scancel records what it was asked.
    await writeFile(
      join(dir, 'sbatch'),
      '#!/bin/sh\necho "sbatch: error: Batch job submission failed: Unable to contact slurm controller (connect failure)" >&2\nexit 1\n',
    );
    await writeFile(join(dir, 'scancel'), `#!/bin/sh\necho "$@" >> ${join(dir, 'cancelled')}\n`);
    await chmod(join(dir, 'sbatch'), 0o755);
    await chmod(join(dir, 'scancel'), 0o755);
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('is SandboxUnavailable (exit 3) saying what Slurm said and what to check', async () => {
    const backend = new SlurmBackend({ conf: join(dir, 'slurm.conf'), path: `${dir}:/usr/bin:/bin` });
    const error = await backend.create({ image: 'x' }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(SandboxUnavailable);
    expect((error as SandboxUnavailable).message).toMatch(/Unable to contact slurm controller/);
    expect((error as SandboxUnavailable).hint).toMatch(/scontrol ping/);
  });

  it('a missing slurm.conf is a usage error, never a DNS lookup of the cluster', async () => {
    const backend = new SlurmBackend({ conf: join(dir, 'nope.conf'), path: `${dir}:/usr/bin:/bin` });
    await expect(backend.create({ image: 'x' })).rejects.toBeInstanceOf(UsageError);
  });

  it('the exit hook cancels nothing when nothing is live', async () => {
    cancelLiveJobsSync();
    await expect(readFile(join(dir, 'cancelled'), 'utf8')).rejects.toThrow();
  });
});

describe('--backend and the placement flags', () => {
  it('passes partition, account, qos and constraint to the slurm backend only', () => {
    expect(backendChoice({})).toEqual({ name: 'docker', options: {} });
    expect(backendChoice({ backend: 'slurm', partition: 'gpu', qos: 'low' })).toEqual({
      name: 'slurm',
      options: { cluster: { partition: 'gpu', qos: 'low' } },
    });
    expect(() => backendChoice({ partition: 'gpu' })).toThrow(/needs --backend slurm/);
  });
});

describe('slurm: notes for a person', () => {
  it("a node it leaves out is said through the provider's onNote (eval prints it beside the progress line)", async () => {
    const { sandboxProvider } = await import('../../../src/sandbox/backend-registry.js');
    const notes: string[] = [];
    const provider = await sandboxProvider('slurm', { onNote: (line) => notes.push(line) });
    const backend = provider.backend as SlurmBackend;
    backend.health.lost('node9');
    expect(notes).toEqual(['slurm: node node9 excluded: lost mid-sandbox']);
    expect(backend.health.excludeArgs()).toEqual(['--exclude=node9']);
  });
});

describe("slurm: a node's probe with an image the node lacks", () => {
  it('says the image does not exist on the node, whatever srun printed last', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'slurm-fake-'));
    try {
      await writeFile(join(dir, 'slurm.conf'), 'ClusterName=fake\n');
      // The probe script's line, then srun's own exit line after it (the order is a race on a real node).
      await writeFile(
        join(dir, 'srun'),
        '#!/bin/sh\necho "image img:gone is not on node node2" >&2\necho "srun: error: node2: task 0: Exited with exit code 40" >&2\nexit 40\n',
      );
      await chmod(join(dir, 'srun'), 0o755);
      const { probeNode } = await import('../../../src/sandbox/slurm/slurm-operator.js');
      const { SlurmClient } = await import('../../../src/sandbox/slurm/slurm-client.js');
      const client = new SlurmClient({ conf: join(dir, 'slurm.conf'), path: `${dir}:/usr/bin:/bin` });
      const probe = await probeNode(client, 'node2', 'img:gone', { job: '7', node: 'node2' });
      expect(probe).toEqual({
        node: 'node2',
        ok: false,
        missingImage: true,
        detail: 'image img:gone does not exist on node node2',
      });
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe("slurm: a node's name as the cluster gives it", () => {
  it('is kept (in a record, an error, an eval result) only when it is a plain host name', async () => {
    const { nodeName } = await import('../../../src/sandbox/slurm/srun-transport.js');
    expect(nodeName('node1')).toBe('node1');
    expect(nodeName('gpu-a.rack_2')).toBe('gpu-a.rack_2');
    for (const bad of ['\x1b[31mnode1', 'node1\nnode2', '', '-n', 'a'.repeat(64), '../x'])
      expect(nodeName(bad)).toBeUndefined();
  });
});
