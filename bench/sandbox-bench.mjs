/**
 * Sandbox benchmarks: the harness's Docker sandbox against the plain docker CLI (or the
 * plain engine API) doing the same job, measured side by side in the same process and,
 * where possible, interleaved repetition by repetition (A B, B A, A B, ...) so drift on a
 * shared machine hits both sides alike. Warm-up repetitions run first and are discarded.
 * The change path has its own module (`changes-bench.mjs`).
 *
 * What each measurement means:
 *
 * - `createToReady.sandbox`: `dockerBackend().create({ image, role: 'bench' })` (hardened
 *   container: cap-drop ALL, no network, limits, init, tmpfs; create + start) until the
 *   first `sandbox.exec('true')` has returned exit 0. Disposing the sandbox afterwards is
 *   not part of this time (it is reported separately as `createToReady.sandboxDispose`).
 * - `createToReady.egress`: the same with `egress` set (an allow list that names nothing,
 *   a resolver on loopback that is never asked): what a proxied sandbox adds, i.e. its
 *   internal network, the firewall hole and the proxy on the host, before the first exec.
 *   Measured only where egress can be enforced (root, iptables, a local engine).
 * - `createToReady.dockerRun`: `docker run --rm <image> true` through the docker CLI,
 *   spawned from Node, until the CLI exits: create, start, run `true`, wait, remove. It has
 *   none of the hardening options and includes the removal and the CLI's own start-up.
 * - `exec.channel`: one `sandbox.exec('true', { fast: true })` round trip: a line to the
 *   sandbox's long-lived command channel (what the agent's tool calls use), `timeout`, output
 *   relay, the end markers back. `exec.channelCheck` shows the command really ran over the
 *   channel (its stdout was the channel's relay, not an exec's), so a silent fall-back to one
 *   exec per call cannot pass for the channel.
 * - `exec.sandbox`: one `sandbox.exec('true')` round trip without the channel: one daemon
 *   exec with the harness's wrapper (fifo relay, pid file, `timeout -k`, `sh -c`), output
 *   capture, and polling the daemon's exec state until the command is known to have exited.
 *   What tests, scans and every verdict use.
 * - `exec.engineExec`: the daemon exec without the harness's wrapper or polling:
 *   `DockerEngine.exec.start(['true'])`, wait for the stream to end, one inspect.
 * - `exec.dockerExecCli`: `docker exec <id> true` through the docker CLI on the same
 *   container (spawned from Node, CLI start-up included).
 */
import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { checkInterrupted, run } from './process.mjs';
import { ratio, summarize } from './stats.mjs';
import { createTracked, execOk, nullSink, repeat, rotate } from './sandbox-helpers.mjs';

/**
 * Label on the containers `docker run` makes, unique to this bench process, so a leftover
 * can be found and removed without touching anyone else's containers.
 */
const BENCH_LABEL = `sandbox-harness.bench=${process.pid}-${randomBytes(3).toString('hex')}`;

/** @typedef {import('./sandbox-helpers.mjs').BenchBackend} BenchBackend */
/** @typedef {import('./sandbox-helpers.mjs').BenchEngine} BenchEngine */

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
 * @param {{ backend: BenchBackend, image: string, reps: number, warmup: number, log: (line: string) => void }} o
 */
async function benchCreateToReady(o) {
  /** @type {number[]} */ const sandbox = [];
  /** @type {number[]} */ const createOnly = [];
  /** @type {number[]} */ const firstExec = [];
  /** @type {number[]} */ const dispose = [];
  /** @type {number[]} */ const dockerRun = [];
  /** @type {number[]} */ const egress = [];
  const egressOk = (await o.backend.egressProblem?.()) === undefined;
  const viaEgress = async (/** @type {boolean} */ keep) => {
    if (!egressOk) return;
    const t0 = performance.now();
    const { sandbox: box, dispose: disposeBox } = await createTracked(o.backend, o.image, {
      egress: { allow: [], deny: [], privateRanges: [], resolvers: ['127.0.0.1'] },
    });
    try {
      await execOk(box, 'true');
      if (keep) egress.push(performance.now() - t0);
    } finally {
      await disposeBox();
    }
  };

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
      await viaEgress(keep);
      await viaCli(keep);
    } else {
      await viaCli(keep);
      await viaEgress(keep);
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
    ...(egress.length > 0 ? { egress: summarize(egress), egressRatio: ratio(summarize(egress), s) } : {}),
  };
}

/** Where a command's stdout goes when it runs over the command channel (`CHANNEL_SCRIPT`). */
const CHANNEL_RELAY = /\/\.sandbox-harness-channel-[^/]+\/o\d+$/;
/** ... and when it runs as one exec (`EXEC_WRAPPER`). */
const EXEC_RELAY = /\/\.sandbox-harness-exec-[^/]+\/out$/;

/**
 * @param {{ backend: BenchBackend, engine: BenchEngine, image: string, reps: number, warmup: number, log: (line: string) => void }} o
 */
async function benchExec(o) {
  /** @type {number[]} */ const viaChannel = [];
  /** @type {number[]} */ const viaSandbox = [];
  /** @type {number[]} */ const viaCli = [];
  /** @type {number[]} */ const viaEngine = [];
  const { sandbox: box, dispose } = await createTracked(o.backend, o.image);
  let channelCheck;
  try {
    await execOk(box, 'true');
    // Which way each kind of call really went: the relay its stdout was written to.
    const where = async (/** @type {boolean} */ fast) =>
      (await execOk(box, 'readlink /proc/self/fd/1', { fast })).stdout.trim();
    const fastRelay = await where(true);
    const execRelay = await where(false);
    channelCheck = {
      fastStdout: fastRelay,
      execStdout: execRelay,
      channelUsed: CHANNEL_RELAY.test(fastRelay),
      execUsedOneExec: EXEC_RELAY.test(execRelay),
    };
    if (!channelCheck.channelUsed) {
      o.log(`  warning: exec({ fast: true }) did not run over the command channel (stdout was ${fastRelay})`);
    }
    const timedExec = async (/** @type {number[]} */ samples, /** @type {boolean} */ keep, fast = false) => {
      const t0 = performance.now();
      await execOk(box, 'true', { fast });
      if (keep) samples.push(performance.now() - t0);
    };
    const engineOnce = async (/** @type {boolean} */ keep) => {
      const t0 = performance.now();
      const running = await o.engine.exec.start(box.id, {
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
    const cliOnce = async (/** @type {boolean} */ keep) => {
      const ms = await dockerCli(['exec', box.id, 'true']);
      if (keep) viaCli.push(ms);
    };
    await repeat(
      { ...o, label: 'tool-call round trip: channel, exec, engine exec, docker exec' },
      (i, keep) =>
        rotate(i, [
          () => timedExec(viaChannel, keep, true),
          () => timedExec(viaSandbox, keep),
          () => engineOnce(keep),
          () => cliOnce(keep),
        ]),
    );
  } finally {
    await dispose();
  }
  const ch = summarize(viaChannel);
  const s = summarize(viaSandbox);
  const c = summarize(viaCli);
  const e = summarize(viaEngine);
  return {
    channel: ch,
    channelCheck,
    sandbox: s,
    engineExec: e,
    dockerExecCli: c,
    channelToEngine: ratio(ch, e),
    ratio: ratio(s, c),
    ratioToEngine: ratio(s, e),
  };
}

/**
 * @param {{ backend: BenchBackend, engine: BenchEngine, baseImage: string, reps: number, warmup: number, log: (line: string) => void }} o
 */
export async function benchSandbox(o) {
  const common = { backend: o.backend, engine: o.engine, reps: o.reps, warmup: o.warmup, log: o.log };
  try {
    const createToReady = await benchCreateToReady({ ...common, image: o.baseImage });
    const exec = await benchExec({ ...common, image: o.baseImage });
    return { image: o.baseImage, reps: o.reps, warmup: o.warmup, createToReady, exec };
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
