/**
 * Sandbox benchmarks: the harness's Docker sandbox against the plain docker CLI (or the
 * plain engine API) doing the same job, measured side by side in the same process and,
 * where possible, interleaved repetition by repetition (A B, B A, A B, ...) so drift on a
 * shared machine hits both sides alike. Warm-up repetitions run first and are discarded.
 *
 * What each measurement means:
 *
 * - `createToReady.sandbox`: `dockerBackend().create({ image, role: 'bench' })` (hardened
 *   container: cap-drop ALL, no network, limits, init, tmpfs; create + start) until the
 *   first `sandbox.exec('true')` has returned exit 0. Disposing the sandbox afterwards is
 *   not part of this time (it is reported separately as `createToReady.sandboxDispose`).
 * - `createToReady.dockerRun`: `docker run --rm <image> true` through the docker CLI,
 *   spawned from Node, until the CLI exits: create, start, run `true`, wait, remove. It has
 *   none of the hardening options and includes the removal and the CLI's own start-up.
 * - `exec.sandbox`: one `sandbox.exec('true')` round trip on a running sandbox: the
 *   harness's exec wrapper (pid file + `timeout -k` + `sh -c`), output capture, and its
 *   polling of the daemon's exec state until the command is known to have exited.
 * - `exec.dockerExecCli`: `docker exec <id> true` through the docker CLI on the same
 *   container (spawned from Node, CLI start-up included).
 * - `exec.engineExec` (diagnostic): the same daemon exec without the harness's wrapper or
 *   polling: `DockerEngine.startExec(['true'])`, wait for the stream to end, one inspect.
 * - `changes.sandbox`: `sandbox.changes()` on a sandbox whose image holds a 20,000-file
 *   workspace, after one file was changed with `exec` (the daemon's container diff plus
 *   the harness's filtering). The change itself is made before timing starts.
 * - `changes.archivePull`: the alternative a harness without the daemon's diff would use:
 *   `DockerEngine.getArchive('/workspace')` of the same container, every byte drained.
 * - `changes.dockerDiffCli` (diagnostic): `docker diff <id>` through the CLI, to tell the
 *   daemon's own cost from the harness's.
 * - `changes.baseImageChanges` (diagnostic): `sandbox.changes()` on a sandbox of the plain
 *   base image (an empty workspace, nothing changed), to show what the diff costs without
 *   the 20,000 files.
 */
import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { Writable } from 'node:stream';
import { checkInterrupted, onCleanup, run } from './process.mjs';
import { ratio, summarize } from './stats.mjs';
import { CHANGED_FILE, FILE_COUNT, manyFilesImage } from './many-files.mjs';

/**
 * Label on the containers `docker run` makes, unique to this bench process, so a leftover
 * can be found and removed without touching anyone else's containers.
 */
const BENCH_LABEL = `sandbox-harness.bench=${process.pid}-${randomBytes(3).toString('hex')}`;

/**
 * @typedef {{ id: string, exec: (command: string, options?: object) => Promise<{ exitCode: number, stderr: string }>, changes: () => Promise<Array<{ path: string, kind: string }>>, dispose: () => Promise<void> }} BenchSandbox
 * @typedef {{ create: (spec: { image: string, role: string }) => Promise<BenchSandbox> }} BenchBackend
 * @typedef {{ startExec: (id: string, options: object) => Promise<{ streamEnded: Promise<void>, inspect: () => Promise<{ running: boolean, exitCode: number | null }>, detach: () => void }>, getArchive: (id: string, path: string) => Promise<AsyncIterable<Buffer> | undefined> }} BenchEngine
 */

const nullSink = () =>
  new Writable({
    write(_chunk, _encoding, callback) {
      callback();
    },
  });

/**
 * A sandbox that is disposed whatever happens, also on a second Ctrl-C.
 *
 * @param {BenchBackend} backend
 * @param {string} image
 */
async function createTracked(backend, image) {
  const sandbox = await backend.create({ image, role: 'bench' });
  const unregister = onCleanup(() => sandbox.dispose());
  return {
    sandbox,
    dispose: async () => {
      try {
        await sandbox.dispose();
      } finally {
        unregister();
      }
    },
  };
}

/**
 * @param {BenchSandbox} sandbox
 * @param {string} command
 */
async function execOk(sandbox, command) {
  const result = await sandbox.exec(command, { timeoutMs: 60_000 });
  if (result.exitCode !== 0) {
    throw new Error(`sandbox exec \`${command}\` exited ${result.exitCode}: ${result.stderr.trim()}`);
  }
}

/**
 * @param {string[]} args
 */
async function dockerCli(args) {
  const result = await run('docker', args);
  if (result.code !== 0) {
    checkInterrupted();
    throw new Error(
      `\`docker ${args.join(' ')}\` exited ${result.code}: ${result.stderr.trim().slice(-500)}`,
    );
  }
  return result.ms;
}

/**
 * Runs `fn(i)` for warm-ups plus repetitions and keeps the samples of the repetitions.
 *
 * @param {{ reps: number, warmup: number, label: string, log: (line: string) => void }} plan
 * @param {(i: number, keep: boolean) => Promise<void>} fn
 */
async function repeat(plan, fn) {
  const total = plan.warmup + plan.reps;
  for (let i = 0; i < total; i++) {
    checkInterrupted();
    await fn(i, i >= plan.warmup);
    if (process.stderr.isTTY) process.stderr.write(`\r  ${plan.label}: ${i + 1}/${total}   `);
  }
  if (process.stderr.isTTY) process.stderr.write('\r\x1b[K');
  plan.log(`  ${plan.label}: ${plan.reps} repetitions after ${plan.warmup} warm-up(s)`);
}

/**
 * @param {{ backend: BenchBackend, image: string, reps: number, warmup: number, log: (line: string) => void }} o
 */
async function benchCreateToReady(o) {
  /** @type {number[]} */ const sandbox = [];
  /** @type {number[]} */ const createOnly = [];
  /** @type {number[]} */ const firstExec = [];
  /** @type {number[]} */ const dispose = [];
  /** @type {number[]} */ const dockerRun = [];

  const viaSandbox = async (/** @type {boolean} */ keep) => {
    const t0 = performance.now();
    const { sandbox: box, dispose: disposeBox } = await createTracked(o.backend, o.image);
    const t1 = performance.now();
    try {
      await execOk(box, 'true');
      const t2 = performance.now();
      if (keep) {
        sandbox.push(t2 - t0);
        createOnly.push(t1 - t0);
        firstExec.push(t2 - t1);
      }
    } finally {
      const t3 = performance.now();
      await disposeBox();
      if (keep) dispose.push(performance.now() - t3);
    }
  };
  const viaCli = async (/** @type {boolean} */ keep) => {
    const ms = await dockerCli(['run', '--rm', '--label', BENCH_LABEL, o.image, 'true']);
    if (keep) dockerRun.push(ms);
  };

  await repeat({ ...o, label: 'create-to-ready vs docker run --rm' }, async (i, keep) => {
    if (i % 2 === 0) {
      await viaSandbox(keep);
      await viaCli(keep);
    } else {
      await viaCli(keep);
      await viaSandbox(keep);
    }
  });
  const s = summarize(sandbox);
  const d = summarize(dockerRun);
  return {
    sandbox: s,
    dockerRun: d,
    ratio: ratio(s, d),
    sandboxCreateOnly: summarize(createOnly),
    sandboxFirstExec: summarize(firstExec),
    sandboxDispose: summarize(dispose),
  };
}

/**
 * @param {{ backend: BenchBackend, engine: BenchEngine, image: string, reps: number, warmup: number, log: (line: string) => void }} o
 */
async function benchExec(o) {
  /** @type {number[]} */ const viaSandbox = [];
  /** @type {number[]} */ const viaCli = [];
  /** @type {number[]} */ const viaEngine = [];
  const { sandbox: box, dispose } = await createTracked(o.backend, o.image);
  try {
    await execOk(box, 'true');
    const sandboxOnce = async (/** @type {boolean} */ keep) => {
      const t0 = performance.now();
      await execOk(box, 'true');
      if (keep) viaSandbox.push(performance.now() - t0);
    };
    const cliOnce = async (/** @type {boolean} */ keep) => {
      const ms = await dockerCli(['exec', box.id, 'true']);
      if (keep) viaCli.push(ms);
    };
    const engineOnce = async (/** @type {boolean} */ keep) => {
      const t0 = performance.now();
      const running = await o.engine.startExec(box.id, {
        cmd: ['true'],
        user: '1000:1000',
        workingDir: '/workspace',
        env: [],
        stdout: nullSink(),
        stderr: nullSink(),
      });
      await running.streamEnded;
      let state = await running.inspect();
      while (state.running) state = await running.inspect();
      running.detach();
      if (state.exitCode !== 0) throw new Error(`engine exec of \`true\` exited ${state.exitCode}`);
      if (keep) viaEngine.push(performance.now() - t0);
    };
    const steps = [sandboxOnce, cliOnce, engineOnce];
    await repeat({ ...o, label: 'exec round trip vs docker exec' }, async (i, keep) => {
      // Rotate the order so no side always runs first.
      for (let k = 0; k < steps.length; k++) await steps[(i + k) % steps.length](keep);
    });
  } finally {
    await dispose();
  }
  const s = summarize(viaSandbox);
  const c = summarize(viaCli);
  const e = summarize(viaEngine);
  return { sandbox: s, dockerExecCli: c, ratio: ratio(s, c), engineExec: e, ratioToEngine: ratio(s, e) };
}

/**
 * @param {{ backend: BenchBackend, engine: BenchEngine, buildRepoImage: Parameters<typeof manyFilesImage>[0]['buildRepoImage'], baseImage: string, reps: number, warmup: number, log: (line: string) => void }} o
 */
async function benchChanges(o) {
  const image = await manyFilesImage({ buildRepoImage: o.buildRepoImage, log: o.log });
  /** @type {number[]} */ const viaChanges = [];
  /** @type {number[]} */ const viaArchive = [];
  /** @type {number[]} */ const viaDiffCli = [];
  /** @type {number[]} */ const onBase = [];
  /** @type {number[]} */ const archiveBytes = [];
  /** @type {Array<{ path: string, kind: string }>} */
  let reported = [];
  let everyRepetitionSawOneChange = true;

  const baseBox = await createTracked(o.backend, o.baseImage);
  try {
    await repeat({ ...o, label: 'changes() vs full /workspace archive (20k files)' }, async (i, keep) => {
      const { sandbox: box, dispose } = await createTracked(o.backend, image.tag);
      try {
        await execOk(box, `echo changed >> ${CHANGED_FILE}`);
        const changesOnce = async () => {
          const t0 = performance.now();
          reported = await box.changes();
          const ms = performance.now() - t0;
          if (reported.length !== 1 || reported[0]?.path !== CHANGED_FILE)
            everyRepetitionSawOneChange = false;
          if (keep) viaChanges.push(ms);
        };
        const archiveOnce = async () => {
          const t0 = performance.now();
          const stream = await o.engine.getArchive(box.id, '/workspace');
          if (!stream) throw new Error('getArchive(/workspace) found nothing');
          let bytes = 0;
          for await (const chunk of stream) bytes += chunk.length;
          const ms = performance.now() - t0;
          if (keep) {
            viaArchive.push(ms);
            archiveBytes.push(bytes);
          }
        };
        const diffCliOnce = async () => {
          const ms = await dockerCli(['diff', box.id]);
          if (keep) viaDiffCli.push(ms);
        };
        const baseOnce = async () => {
          const t0 = performance.now();
          await baseBox.sandbox.changes();
          if (keep) onBase.push(performance.now() - t0);
        };
        const steps = [changesOnce, archiveOnce, diffCliOnce, baseOnce];
        for (let k = 0; k < steps.length; k++) await steps[(i + k) % steps.length]();
      } finally {
        await dispose();
      }
    });
  } finally {
    await baseBox.dispose();
  }
  const c = summarize(viaChanges);
  const a = summarize(viaArchive);
  return {
    image: {
      tag: image.tag,
      reused: image.reused,
      workspaceFiles: image.files,
      generatedFiles: FILE_COUNT,
      buildOrReuseMs: Math.round(image.buildOrReuseMs),
    },
    changedFile: CHANGED_FILE,
    changesReported: reported,
    everyRepetitionSawExactlyTheOneChange: everyRepetitionSawOneChange,
    sandbox: c,
    archivePull: a,
    ratio: ratio(c, a),
    archiveBytes: archiveBytes[0] ?? 0,
    dockerDiffCli: summarize(viaDiffCli),
    baseImageChanges: summarize(onBase),
  };
}

/**
 * @param {{ backend: BenchBackend, engine: BenchEngine, buildRepoImage: Parameters<typeof manyFilesImage>[0]['buildRepoImage'], baseImage: string, reps: number, warmup: number, log: (line: string) => void }} o
 */
export async function benchSandbox(o) {
  const common = { backend: o.backend, engine: o.engine, reps: o.reps, warmup: o.warmup, log: o.log };
  try {
    const createToReady = await benchCreateToReady({ ...common, image: o.baseImage });
    const exec = await benchExec({ ...common, image: o.baseImage });
    const changes = await benchChanges({
      ...common,
      buildRepoImage: o.buildRepoImage,
      baseImage: o.baseImage,
    });
    return { image: o.baseImage, reps: o.reps, warmup: o.warmup, createToReady, exec, changes };
  } finally {
    await removeLabelledLeftovers();
  }
}

/** `docker run --rm` removes its container, unless the CLI was killed mid-way; then this does. */
export async function removeLabelledLeftovers() {
  const listed = await run('docker', ['ps', '-aq', '--filter', `label=${BENCH_LABEL}`]).catch(
    () => undefined,
  );
  const ids = listed?.stdout.split('\n').filter(Boolean) ?? [];
  if (ids.length > 0) await run('docker', ['rm', '-f', ...ids]).catch(() => undefined);
}
