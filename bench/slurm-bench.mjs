/**
 * Slurm backend (issue 34): the lab cluster of the Slurm tests (`scripts/test-slurm.ts`:
 * munge, slurmctld and three slurmd nodes, each with its own Docker engine in its own network
 * namespace, on this machine), started for the bench and stopped at the end, whatever happens.
 * Root only.
 *
 * 1. Create-to-ready: `SlurmBackend.create({ image, role: 'bench' })` + the first
 *    `exec('true')` (a batch job submitted, scheduled, its container started on the node by
 *    the node's `docker`, one job step) against the same on the local docker backend, in
 *    turn (even repetitions slurm first, odd ones local first), on the base image the lab
 *    loads into every node. `queueWaitMs`: from the first `onQueued` event of a create to the
 *    one that says it left the queue (0 when Slurm never reported it waiting).
 * 2. Trials per minute over three nodes against one: a suite of the example's passing task
 *    whose test command first sleeps (`sleep <s> && npm test`), so a trial waits rather than
 *    computes and the machine's two cores do not cap the cluster. Each lab node offers Slurm 1
 *    CPU, so Slurm, not the machine, decides how many sandboxes a node runs at once (one
 *    trial's sandbox at a time: with 2 CPUs a node ran two trials, and three nodes at
 *    concurrency 3 could be at most 1.5x one). The
 *    same eval (`-n` trials, `--concurrency` as many) with `--partition spread` (all three
 *    nodes, least loaded first: the lab's `main` packs jobs onto the first nodes) and
 *    `--partition solo` (one node), after one cold eval over `spread` that builds the
 *    repo image on the nodes (its wall time is reported as `cold`); then the same suite on the
 *    local docker backend at the same concurrency, for the per-trial harness overhead there.
 *    Numbers per eval are those of `eval-bench.mjs` (`runSuite`): trials per minute over the
 *    eval's own wall time, trial time, test time, and overhead per trial (trial time minus
 *    test, model and agent-command time).
 * 3. Scheduling cost per trial: the median trial time over Slurm minus the median trial time on
 *    the local engine for the same suite at the same concurrency: what submitting every sandbox
 *    as a job and every call as a job step adds to a trial (the overhead figures are not
 *    comparable across backends: a wait that is agent-command time over Slurm is counted as
 *    overhead locally).
 */
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { pathToFileURL } from 'node:url';
import { parse as parseYaml, stringify as stringifyYaml } from 'yaml';
import { prepareCopy, runSuite } from './eval-bench.mjs';
import { checkInterrupted, onCleanup, runOk } from './process.mjs';
import { createTracked, execOk } from './sandbox-helpers.mjs';
import { ratio, round1, summarize } from './stats.mjs';

const CPUS_PER_NODE = 1;
/** A partition of all three nodes that places each job on the least loaded one. */
const SPREAD = 'spread';

/**
 * @param {string} packageRoot
 * @param {string[]} args
 */
function testSlurm(packageRoot, args) {
  return runOk(
    process.execPath,
    ['--import', 'tsx', join(packageRoot, 'scripts', 'test-slurm.ts'), ...args],
    {
      cwd: packageRoot,
    },
  );
}

/**
 * The example suite cut to its task that passes, with a catalog whose test command first
 * sleeps `sleepSec` seconds: a trial that waits on its tests instead of computing.
 *
 * @param {string} suite
 * @param {number} sleepSec
 */
async function waitingSuite(suite, sleepSec) {
  const dir = join(suite, '..');
  const catalog = parseYaml(await readFile(join(dir, 'shipping-eval.yaml'), 'utf8'));
  catalog.agent.testCommand = `sleep ${sleepSec} && ${catalog.agent.testCommand}`;
  await writeFile(join(dir, 'shipping-eval-waiting.yaml'), stringifyYaml(catalog));
  const parsed = parseYaml(await readFile(suite, 'utf8'));
  const task = parsed.tasks.find((/** @type {{ id: string }} */ t) => t.id === 'fixes-threshold');
  if (!task) throw new Error(`${suite}: the task fixes-threshold is gone`);
  const file = join(dir, 'suite-waiting.yaml');
  await writeFile(
    file,
    stringifyYaml({
      ...parsed,
      name: 'shipping-waiting',
      tasks: [{ ...task, catalog: 'shipping-eval-waiting.yaml' }],
    }),
  );
  return file;
}

/** @param {any} r one `runSuite` result, without its per-trial details */
const brief = (r) => Object.fromEntries(Object.entries(r).filter(([k]) => k !== 'trialDetails'));

/**
 * @param {{ packageRoot: string, baseImage: string, reps: number, warmup: number, n: number,
 *   concurrency: number, sleepSec: number, log: (line: string) => void, keepTemp: boolean }} o
 */
export async function benchSlurm(o) {
  if (process.getuid?.() !== 0) {
    throw Object.assign(
      new Error(
        'the Slurm benchmark starts a Slurm lab in network namespaces and needs root (or use --skip-slurm)',
      ),
      { exitCode: 3 },
    );
  }
  const dist = (/** @type {string} */ p) => pathToFileURL(join(o.packageRoot, 'dist', p)).href;
  const { SlurmBackend } = await import(dist('sandbox/slurm/slurm-sandbox.js'));
  const { dockerBackend } = await import(dist('sandbox/docker/index.js'));

  const parent = await mkdtemp(join(tmpdir(), 'sandbox-harness-bench-slurm-'));
  /** @type {string | undefined} */
  let lab;
  const cleanUp = async () => {
    if (lab) await testSlurm(o.packageRoot, ['stop', lab]).catch(() => undefined);
    lab = undefined;
    if (!o.keepTemp) await rm(parent, { recursive: true, force: true });
  };
  const unregister = onCleanup(cleanUp);
  try {
    o.log(`  starting the Slurm lab (3 nodes, ${CPUS_PER_NODE} CPUs each) ...`);
    const t0 = performance.now();
    const { stdout } = await testSlurm(o.packageRoot, [
      'start',
      '--nodes',
      '3',
      '--cpus-per-node',
      String(CPUS_PER_NODE),
      // The lab's `main` partition packs jobs onto the first nodes (a first run left node3 idle);
      // LLN (least loaded node) spreads them, so three nodes are three nodes' capacity.
      '--conf',
      `PartitionName=${SPREAD} Nodes=node1,node2,node3 Default=NO MaxTime=INFINITE State=UP LLN=YES`,
      '--owner-pid',
      String(process.pid),
      '--json',
    ]);
    const labReadyMs = Math.round(performance.now() - t0);
    /** @type {{ name: string, SLURM_CONF: string, nodes: Array<{ name: string }> }} */
    const started = JSON.parse(stdout);
    lab = started.name;
    const conf = started.SLURM_CONF;
    // Slurm commands and the CLI reach the lab by SLURM_CONF; a DOCKER_HOST would follow a job to the node.
    const env = { ...process.env, SLURM_CONF: conf };
    delete env.DOCKER_HOST;

    // 1. Create-to-ready, slurm and local in turn.
    /** @type {number[]} */ const slurmReady = [];
    /** @type {number[]} */ const slurmCreate = [];
    /** @type {number[]} */ const localReady = [];
    /** @type {number[]} */ const queueWait = [];
    /** @type {number | undefined} */
    let queuedAt;
    /** @type {number} */
    let waited = 0;
    const slurm = new SlurmBackend({
      conf,
      timeLimitMinutes: 30,
      onQueued: (/** @type {{ state: string, reason: string }} */ e) => {
        if (e.reason && queuedAt === undefined) queuedAt = performance.now();
        if (!e.reason && queuedAt !== undefined) {
          waited += performance.now() - queuedAt;
          queuedAt = undefined;
        }
      },
    });
    const local = dockerBackend();
    const once = async (
      /** @type {any} */ backend,
      /** @type {boolean} */ keep,
      /** @type {boolean} */ isSlurm,
    ) => {
      waited = 0;
      queuedAt = undefined;
      const a = performance.now();
      const { sandbox, dispose } = await createTracked(backend, o.baseImage);
      const b = performance.now();
      try {
        await execOk(sandbox, 'true');
        const c = performance.now();
        if (!keep) return;
        if (isSlurm) {
          slurmReady.push(c - a);
          slurmCreate.push(b - a);
          queueWait.push(waited);
        } else localReady.push(c - a);
      } finally {
        await dispose();
      }
    };
    o.log(`  create-to-ready, slurm vs local: ${o.reps} pairs after ${o.warmup} warm-up(s) ...`);
    for (let i = 0; i < o.warmup + o.reps; i++) {
      checkInterrupted();
      const keep = i >= o.warmup;
      if (i % 2 === 0) {
        await once(slurm, keep, true);
        await once(local, keep, false);
      } else {
        await once(local, keep, false);
        await once(slurm, keep, true);
      }
    }
    const slurmSummary = summarize(slurmReady);
    const localSummary = summarize(localReady);
    const createToReady = {
      image: o.baseImage,
      slurm: slurmSummary,
      slurmCreateOnly: summarize(slurmCreate),
      slurmQueueWait: summarize(queueWait),
      local: localSummary,
      ratio: ratio(slurmSummary, localSummary),
    };
    o.log(
      `    slurm ${slurmSummary.medianMs} ms median (p90 ${slurmSummary.p90Ms}), local ${localSummary.medianMs} ms (p90 ${localSummary.p90Ms})`,
    );

    // 2. Trials per minute, three nodes vs one; 3. scheduling cost per trial.
    const { suite: exampleSuite } = await prepareCopy(o.packageRoot, parent, o.log);
    const suite = await waitingSuite(exampleSuite, o.sleepSec);
    const cli = join(o.packageRoot, 'dist', 'main.js');
    const common = { cli, cwd: parent, suite, n: o.n, concurrency: o.concurrency, env };
    const onSlurm = (/** @type {string} */ partition) => ['--backend', 'slurm', '--partition', partition];
    checkInterrupted();
    o.log(`  cold eval over 3 nodes (-n 3: the repo image built on the nodes) ...`);
    const cold = await runSuite({
      ...common,
      n: 3,
      outDir: join(parent, 'out-cold'),
      extra: onSlurm(SPREAD),
    });
    /** @type {Record<string, any>} */
    const evals = {};
    for (const [key, extra] of /** @type {Array<[string, string[]]>} */ ([
      ['threeNodes', onSlurm(SPREAD)],
      ['oneNode', onSlurm('solo')],
      ['local', []],
    ])) {
      checkInterrupted();
      o.log(`  eval -n ${o.n} --concurrency ${o.concurrency} (${key}) ...`);
      const r = await runSuite({ ...common, outDir: join(parent, `out-${key}`), extra });
      o.log(
        `    ${r.trials} trials in ${(r.wallTimeMs / 1000).toFixed(1)} s, ${r.trialsPerMinute} trials/min, overhead ${r.overheadMs.median} ms/trial`,
      );
      evals[key] = r;
    }
    const speedUp = evals.oneNode.trialsPerMinute
      ? Math.round((evals.threeNodes.trialsPerMinute / evals.oneNode.trialsPerMinute) * 100) / 100
      : null;
    return {
      lab: { nodes: started.nodes.map((n) => n.name), cpusPerNode: CPUS_PER_NODE, readyMs: labReadyMs },
      createToReady,
      trials: {
        suite: 'examples/evals fixes-threshold, test command `sleep ' + o.sleepSec + ' && npm test`',
        n: o.n,
        concurrency: o.concurrency,
        coldWallTimeMs: cold.wallTimeMs,
        threeNodes: brief(evals.threeNodes),
        oneNode: brief(evals.oneNode),
        local: brief(evals.local),
        speedUp,
        goal: 2.5,
        met: speedUp !== null && speedUp >= 2.5,
      },
      // What Slurm adds to a trial: the same trial (same tests, same cassette) over Slurm minus locally.
      schedulingCostPerTrialMs: {
        threeNodes: round1(evals.threeNodes.trialMs.median - evals.local.trialMs.median),
        oneNode: round1(evals.oneNode.trialMs.median - evals.local.trialMs.median),
        overheadThreeNodesMinusLocal: round1(
          evals.threeNodes.overheadMs.median - evals.local.overheadMs.median,
        ),
      },
    };
  } finally {
    unregister();
    await cleanUp();
  }
}
