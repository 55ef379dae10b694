/**
 * The wait before a job's first container: Slurm starts the batch script and a step
 * independently, so on a loaded node the container could exist before the script's trap does,
 * and a cancel in that gap leaves it behind. Run here with a stand-in `scontrol` that lists a
 * real process as the job's batch step; that process sets its TERM trap late.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { AWAIT_TRAP_SCRIPT } from '../../../src/sandbox/slurm/job-script.js';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** A process that sets its TERM trap after `trapAfterMs` (the job's batch script, started late). */
function batchScript(trapAfterMs: number): ChildProcess {
  const child = spawn(
    'sh',
    ['-c', `sleep ${trapAfterMs / 1000}; trap 'exit 0' TERM; echo trapped; while :; do sleep 1; done`],
    { stdio: ['ignore', 'pipe', 'ignore'] },
  );
  cleanups.push(async () => {
    child.kill('SIGKILL');
  });
  return child;
}

/** A PATH whose `scontrol listpids` prints `pid` as the batch step (or nothing without one). */
async function fakeScontrol(pid: number | undefined): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'sandbox-harness-await-trap-'));
  cleanups.push(() => rm(dir, { recursive: true, force: true }));
  const lines = [
    'PID      JOBID    STEPID   LOCALID GLOBALID',
    ...(pid ? [`${pid}     7        batch    0       0`] : []),
  ];
  await writeFile(
    join(dir, 'scontrol'),
    `#!/bin/sh\n[ "$1 $2" = "listpids 7" ] || exit 1\nprintf '%s\\n' ${lines.map((l) => `'${l}'`).join(' ')}\n`,
  );
  await chmod(join(dir, 'scontrol'), 0o755);
  return dir;
}

async function awaitTrap(path: string): Promise<number> {
  const started = Date.now();
  await new Promise<void>((resolve, reject) => {
    const child = spawn('sh', ['-c', AWAIT_TRAP_SCRIPT], {
      env: { PATH: `${path}:/usr/bin:/bin`, SLURM_JOB_ID: '7' },
      stdio: 'ignore',
    });
    child.on('error', reject);
    child.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`exit ${code}`))));
  });
  return Date.now() - started;
}

describe("the wait for the job's trap", () => {
  it('lasts until the batch script handles TERM, not before', async () => {
    const script = batchScript(1500);
    let trappedAt = 0;
    script.stdout?.on('data', () => (trappedAt ||= Date.now()));
    const path = await fakeScontrol(script.pid);
    const took = await awaitTrap(path);
    const doneAt = Date.now();
    expect(trappedAt, 'the script set its trap').toBeGreaterThan(0);
    expect(doneAt).toBeGreaterThanOrEqual(trappedAt);
    expect(took).toBeGreaterThanOrEqual(1400);
  });

  it('costs nothing once the trap is set', async () => {
    const script = batchScript(0);
    await new Promise((r) => script.stdout?.once('data', r));
    expect(await awaitTrap(await fakeScontrol(script.pid))).toBeLessThan(1000);
  });

  it('does not wait without scontrol on the node', async () => {
    const empty = await mkdtemp(join(tmpdir(), 'sandbox-harness-await-trap-'));
    cleanups.push(() => rm(empty, { recursive: true, force: true }));
    const started = Date.now();
    await new Promise<void>((resolve) => {
      spawn('/bin/sh', ['-c', AWAIT_TRAP_SCRIPT], {
        env: { PATH: empty, SLURM_JOB_ID: '7' },
        stdio: 'ignore',
      }).on('exit', () => resolve());
    });
    expect(Date.now() - started).toBeLessThan(1000);
  });
});
