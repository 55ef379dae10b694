/**
 * Runtimes side by side (issue 24): the same rows under runc, gVisor (runsc) on the local
 * engine, and on rootful Podman (its API service on its own socket), with each one's ratio to
 * runc on Docker. Interleaved repetition by repetition (`rotate`), so drift on a shared machine
 * hits every side alike.
 *
 * - `createToReady`: `backend.create()` + the first `exec('true')` (hardened container).
 * - `channelCall`: one tool call's round trip over the command channel (`exec('true', { fast })`).
 * - `testCommand`: the bundled example's test command (`npm test`) in a fresh sandbox of its
 *   image (one exec, as verification runs it).
 * - `trial`: a whole eval trial of the example suite (`eval -n 1 --concurrency 1`, replayed
 *   model), wall time of the CLI run; target: runsc <= 1.5x runc.
 *
 * Usage: node bench/runtime-bench.mjs [--reps N] [--warmup N] [--skip-podman] [--skip-trial]
 * (also part of `npm run bench` unless `--skip-runtimes`).
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { run } from './process.mjs';
import { ratio, summarize } from './stats.mjs';
import { execOk, repeat, rotate } from './sandbox-helpers.mjs';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const PODMAN_SOCKET = process.env.SANDBOX_HARNESS_PODMAN_SOCKET ?? '/run/podman/podman.sock';

/** @param {string} p */
const dist = (p) => import(pathToFileURL(join(ROOT, 'dist', p)).href);

/**
 * @param {{ reps: number, warmup: number, podman: boolean, trial: boolean, log: (line: string) => void }} options
 */
export async function benchRuntimes(options) {
  const { DockerBackend } = await dist('sandbox/docker/docker-sandbox.js');
  const { DockerEngine, dockerEngine } = await dist('sandbox/docker/engine.js');
  const { buildRepoImage, ensureBaseImage } = await dist('sandbox/docker/images.js');
  const { shipImages } = await dist('sandbox/docker/fleet/images.js');
  const local = dockerEngine();
  await ensureBaseImage('node', { onLine: () => undefined });
  const example = await buildRepoImage({ repoDir: join(ROOT, 'examples', 'shipping-service', 'repo') });
  /** @type {Array<{ name: string, backend: any, runtime?: string, cliEngine?: string[] }>} */
  const sides = [
    { name: 'runc', backend: new DockerBackend(local, 'local') },
    {
      name: 'runsc',
      backend: new DockerBackend(local, 'local'),
      runtime: 'runsc',
      cliEngine: ['--runtime', 'runsc'],
    },
  ];
  if (options.podman) {
    const podman = new DockerEngine({ transport: 'unix', socketPath: PODMAN_SOCKET });
    await podman.ping(3000);
    const there = await podman.inspectImage(example.tag);
    if (there?.id !== example.imageId) await shipImages(local, podman, [example.tag]);
    sides.push({
      name: 'podman',
      backend: new DockerBackend(podman, 'podman'),
      cliEngine: ['--engine', `unix://${PODMAN_SOCKET}`],
    });
  }
  /** @type {Record<string, Record<string, number[]>>} */
  const samples = {};
  const add = (/** @type {string} */ row, /** @type {string} */ side, /** @type {number} */ ms) => {
    samples[row] ??= {};
    (samples[row][side] ??= []).push(ms);
  };
  const make = (/** @type {(typeof sides)[number]} */ side) =>
    side.backend.create({
      image: example.tag,
      role: 'bench',
      ...(side.runtime ? { runtime: side.runtime } : {}),
    });

  await repeat({ ...options, label: 'runtimes: create, channel call, test command' }, async (i, keep) => {
    await rotate(
      i,
      sides.map((side) => async () => {
        let t = performance.now();
        const sandbox = await make(side);
        try {
          await execOk(sandbox, 'true');
          if (keep) add('createToReady', side.name, performance.now() - t);
          await execOk(sandbox, 'true', { fast: true });
          t = performance.now();
          await execOk(sandbox, 'true', { fast: true });
          if (keep) add('channelCall', side.name, performance.now() - t);
        } finally {
          await sandbox.dispose();
        }
        const fresh = await make(side);
        try {
          t = performance.now();
          await execOk(fresh, 'npm test', { timeoutMs: 300_000 });
          if (keep) add('testCommand', side.name, performance.now() - t);
        } finally {
          await fresh.dispose();
        }
      }),
    );
  });

  if (options.trial) {
    const cli = join(ROOT, 'dist', 'main.js');
    const suite = join(ROOT, 'examples', 'evals', 'suite.yaml');
    await repeat(
      { ...options, warmup: 0, reps: Math.max(1, Math.min(options.reps, 3)), label: 'runtimes: eval trial' },
      async (i) => {
        await rotate(
          i,
          sides.map((side) => async () => {
            const out = await mkdtemp(join(tmpdir(), 'sh-bench-runtime-'));
            try {
              const t = performance.now();
              const r = await run('node', [
                cli,
                'eval',
                suite,
                '-n',
                '1',
                '--concurrency',
                '1',
                '--out',
                out,
                '--json',
                ...(side.cliEngine ?? []),
              ]);
              if (r.code !== 0 && r.code !== 1)
                throw new Error(`eval under ${side.name} exited ${r.code}: ${r.stderr.slice(-400)}`);
              add('trial', side.name, performance.now() - t);
            } finally {
              await rm(out, { recursive: true, force: true });
            }
          }),
        );
      },
    );
  }

  /** @type {Record<string, any>} */
  const rows = {};
  for (const [row, bySide] of Object.entries(samples)) {
    const runc = summarize(bySide.runc ?? []);
    rows[row] = { runc };
    for (const [side, values] of Object.entries(bySide)) {
      if (side === 'runc') continue;
      const s = summarize(values);
      rows[row][side] = s;
      rows[row][`${side}VsRunc`] = ratio(s, runc);
    }
  }
  return rows;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const args = process.argv.slice(2);
  const num = (/** @type {string} */ flag, /** @type {number} */ fallback) => {
    const i = args.indexOf(flag);
    return i >= 0 ? Number(args[i + 1]) : fallback;
  };
  const rows = await benchRuntimes({
    reps: num('--reps', 5),
    warmup: num('--warmup', 1),
    podman: !args.includes('--skip-podman'),
    trial: !args.includes('--skip-trial'),
    log: (line) => process.stderr.write(`${line}\n`),
  });
  process.stdout.write(`${JSON.stringify(rows, null, 2)}\n`);
}
