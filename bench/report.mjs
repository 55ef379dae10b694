/**
 * Turning results into the printed table and the saved JSON
 * (`bench/results/<date>-<git short sha>.json` and `bench/results/latest.json`, written
 * as temp file + rename so an interrupted run never leaves half a file).
 */
import { spawnSync } from 'node:child_process';
import { mkdir, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { PHASE_APPLIES, PHASES } from './eval-bench.mjs';

/** One table row: a label, the median and p90 of a measurement, and an optional ratio. */
const row = (label, stats, ratio = '') => [label, ms(stats.medianMs), ms(stats.p90Ms), ratio];

/** Read-only git queries: the commit the results belong to and whether the tree was dirty. */
export function gitInfo(cwd) {
  const git = (/** @type {string[]} */ args) => {
    const r = spawnSync('git', ['--no-optional-locks', ...args], { cwd, encoding: 'utf8' });
    return r.status === 0 ? r.stdout.trim() : undefined;
  };
  const sha = git(['rev-parse', '--short', 'HEAD']);
  const status = git(['status', '--porcelain', '--untracked-files=no']);
  return { sha: sha ?? 'nogit', dirty: status === undefined ? null : status !== '' };
}

const ms = (/** @type {number | undefined | null} */ value) =>
  value === undefined || value === null || Number.isNaN(value)
    ? '-'
    : value >= 10_000
      ? `${(value / 1000).toFixed(1)} s`
      : value >= 100
        ? `${Math.round(value)} ms`
        : `${value.toFixed(1)} ms`;

const times = (/** @type {number | null | undefined} */ r, /** @type {string} */ what) =>
  r === null || r === undefined ? '' : `${r.toFixed(2)}x ${what}`;

/**
 * @param {string[][]} rows first row is the header
 */
function table(rows) {
  const widths = rows[0]?.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length))) ?? [];
  const line = (/** @type {string[]} */ r) =>
    `| ${r.map((cell, i) => (i === 0 || i === r.length - 1 ? cell.padEnd(widths[i] ?? 0) : cell.padStart(widths[i] ?? 0))).join(' | ')} |`;
  const rule = `| ${widths.map((w, i) => (i === 0 || i === widths.length - 1 ? '-'.repeat(w) : `${'-'.repeat(Math.max(0, w - 1))}:`)).join(' | ')} |`;
  return [line(rows[0] ?? []), rule, ...rows.slice(1).map(line)];
}

/**
 * The readable result: one markdown table for the sandbox, one for the eval.
 *
 * @param {object} results what `run.mjs` saves as JSON
 */
export function formatTables(results) {
  /** @type {string[]} */
  const out = [];
  const tg = results.targets;
  if (tg) {
    const verdict = (/** @type {boolean | null} */ met) =>
      met === true ? 'met' : met === false ? 'NOT MET' : '-';
    out.push(
      ...table([
        ['target (issue 12)', 'measured (median)', 'met', 'note'],
        ...tg.map((/** @type {import('./targets.mjs').TargetRow} */ t) => [
          t.target,
          t.shown,
          verdict(t.met),
          t.note,
        ]),
      ]),
    );
  }
  const s = results.sandbox;
  if (s) {
    if (out.length) out.push('');
    const c = s.createToReady;
    const e = s.exec;
    out.push(
      ...table([
        ['operation', 'median', 'p90', 'ratio (median)'],
        row(
          'sandbox create + first exec(`true`) (create-to-ready)',
          c.sandbox,
          times(c.ratio.median, 'docker run'),
        ),
        row('`docker run --rm <image> true` (CLI)', c.dockerRun, '1.00x'),
        row('  of which sandbox create() only', c.sandboxCreateOnly),
        row('  sandbox dispose() (not in the time above)', c.sandboxDispose),
        ...(c.egress
          ? [
              row(
                'sandbox with egress (network, firewall hole, proxy) create-to-ready',
                c.egress,
                times(c.egressRatio.median, 'no network'),
              ),
            ]
          : []),
        row(
          `tool call \`true\` over the command channel (\`exec(.., { fast: true })\`)${e.channelCheck?.channelUsed ? '' : ' [NOT over the channel]'}`,
          e.channel,
          times(e.channelToEngine.median, 'engine exec'),
        ),
        row(
          '`sandbox.exec("true")`, one exec per call',
          e.sandbox,
          times(e.ratioToEngine.median, 'engine exec'),
        ),
        row('engine exec `true` (`DockerEngine.startExec`, no wrapper)', e.engineExec, '1.00x'),
        row(
          '`docker exec <id> true` (CLI)',
          e.dockerExecCli,
          times(e.dockerExecCli.medianMs / e.engineExec.medianMs, 'engine exec'),
        ),
      ]),
    );
    out.push(
      `(${s.reps} repetitions after ${s.warmup} warm-up(s) each; ratio > 1 means slower than the reference)`,
    );
  }
  const fk = results.forks;
  if (fk) {
    if (out.length) out.push('');
    const mib = (/** @type {number} */ b) => `${b / 1024 / 1024} MiB changed`;
    const cell = (/** @type {{ medianMs: number, p90Ms: number }} */ s) => `${s.medianMs} / ${s.p90Ms} ms`;
    out.push(
      ...table([
        [
          'fork of a running sandbox (median / p90)',
          'fork (commit)',
          'its change scan',
          'ready from the fork',
          'ready from the image',
        ],
        ...fk.rows.map((/** @type {any} */ r) => [
          mib(r.changedBytes),
          cell(r.fork),
          cell(r.scan),
          cell(r.readyFromFork),
          cell(r.readyFromImage),
        ]),
      ]),
    );
  }
  const cp = results.changePath;
  if (cp) {
    if (out.length) out.push('');
    const mb = (cp.archiveBytes / 1024 / 1024).toFixed(1);
    const files = cp.image.workspaceFiles.toLocaleString('en-US');
    const vsArchive = (/** @type {{ medianMs: number }} */ stats) =>
      times(stats.medianMs / cp.archivePull.medianMs, 'archive pull');
    out.push(
      ...table([
        [
          `change path, ${files}-file workspace (each scan the first of a fresh sandbox)`,
          'median',
          'p90',
          'ratio (median)',
        ],
        row('pristine tree of the image, read once per image per process (cold)', cp.tree),
        row('`changes()`, nothing changed', cp.changes.none, vsArchive(cp.changes.none)),
        row('`changes()`, 1 changed', cp.changes.one, vsArchive(cp.changes.one)),
        row('`changes()`, 100 changed', cp.changes.hundred, vsArchive(cp.changes.hundred)),
        row('`changes()`, 1,000 changed', cp.changes.thousand, vsArchive(cp.changes.thousand)),
        row('`changes()`, nothing changed, empty workspace (base image)', cp.baseImageNone),
        row(`full \`/workspace\` archive pull, drained (${mb} MB), 1 changed`, cp.archivePull, '1.00x'),
        row(
          'engine diff, 1 changed (`DockerEngine.containerChanges`, diagnostic)',
          cp.engineDiff,
          vsArchive(cp.engineDiff),
        ),
        row('`exportFiles()` of the 1,000 changed files, one stream', cp.exportThousand),
        row('`freeze()` with a background process (diagnostic)', cp.freeze),
        row('verification: the allowed change (1 file) written (diagnostic)', cp.writeOne),
        row('verification invariant, 1 file: scan, export, hash (diagnostic)', cp.invariantOne),
      ]),
    );
    const wrong = Object.entries(cp.checks)
      .filter(([, ok]) => !ok)
      .map(([name]) => name);
    out.push(
      `(${cp.changes.one.n} repetitions; answers checked in every repetition: ${wrong.length === 0 ? 'all right' : `WRONG in ${wrong.join(', ')}`})`,
    );
  }
  const cx = results.context;
  if (cx) {
    if (out.length) out.push('');
    const size = `${cx.files.toLocaleString('en-US')} files, ${(cx.bytes / 1e6).toFixed(0)} MB`;
    out.push(
      ...table([
        [`build context of this checkout (${size})`, 'median', 'p90', 'ratio (median)'],
        row('walk + hash, no secret scan', cx.off, '1.00x'),
        row(
          'with the scan, unchanged repo (clean-digest cache warm)',
          cx.cached,
          times(cx.ratio.cached.median, 'no scan'),
        ),
        row('with the scan, first time (no cache)', cx.uncached, times(cx.ratio.uncached.median, 'no scan')),
      ]),
    );
  }
  const inst = results.instances;
  if (inst) {
    if (out.length) out.push('');
    out.push(
      ...table([
        ['instances (examples/instances/suite.yaml --oracle)', `concurrency ${inst.concurrency}`],
        ['trials', String(inst.trials)],
        ['trials per minute', String(inst.trialsPerMinute)],
        ['trial wall time, median', ms(inst.trialMs?.median)],
        ['harness overhead per trial, median', ms(inst.overheadMs?.median)],
      ]),
    );
  }
  const ev = results.eval;
  if (ev) {
    if (out.length) out.push('');
    /** @type {string[][]} */
    const rows = [['eval (examples/evals/suite.yaml)', 'concurrency 1', 'concurrency 2', 'ratio (2 / 1)']];
    const [c1, c2] = ev.runs;
    const pair = (f) => [c1 ? f(c1) : '-', c2 ? f(c2) : '-'];
    const rate = (f) => (c1 && c2 && f(c1) ? `${(Number(f(c2)) / Number(f(c1))).toFixed(2)}x` : '');
    const pct = (/** @type {number | null | undefined} */ v) =>
      v === null || v === undefined ? '-' : `${(v * 100).toFixed(1)}%`;
    const withP90 = (/** @type {{ median: number, p90: number } | null | undefined} */ d) =>
      `${ms(d?.median)} (${ms(d?.p90)})`;
    rows.push(['trials', ...pair((r) => String(r.trials)), '']);
    rows.push(['eval wall time', ...pair((r) => ms(r.wallTimeMs)), rate((r) => r.wallTimeMs)]);
    rows.push([
      'trials per minute',
      ...pair((r) => String(r.trialsPerMinute)),
      rate((r) => r.trialsPerMinute),
    ]);
    rows.push(['baselines run / reused', ...pair((r) => `${r.baselinesRun} / ${r.baselinesReused}`), '']);
    rows.push([
      'trial wall time, median',
      ...pair((r) => ms(r.trialMs?.median)),
      rate((r) => r.trialMs?.median),
    ]);
    rows.push([
      'test-command time per trial (critical path), median',
      ...pair((r) => ms(r.testMs?.median)),
      rate((r) => r.testMs?.median),
    ]);
    rows.push([
      'model time per trial (agent and checker), median',
      ...pair((r) => ms(r.modelMs?.median)),
      '',
    ]);
    rows.push(['run_command time per trial, median', ...pair((r) => ms(r.agentCommandMs?.median)), '']);
    rows.push([
      "wait for another trial's baseline, p90",
      ...pair((r) => ms(r.sharedBaselineWaitMs?.p90)),
      '',
    ]);
    rows.push([
      'harness overhead per trial, median (p90)',
      ...pair((r) => withP90(r.overheadMs)),
      rate((r) => r.overheadMs?.median),
    ]);
    if (c1?.referenceTasksOnly) {
      rows.push([
        `  the reference's tasks only (${c1.referenceTasksOnly.tasks.length}), median (p90)`,
        ...pair((r) => withP90(r.referenceTasksOnly?.overheadMs)),
        rate((r) => r.referenceTasksOnly?.overheadMs?.median),
      ]);
    }
    rows.push(['overhead share of trial time, median', ...pair((r) => pct(r.overheadShare?.median)), '']);
    rows.push([
      'overhead share of all trial time together',
      ...pair((r) => pct(r.overheadShareOfAllTrialTime)),
      '',
    ]);
    rows.push([
      'phantom test exits (137 in < 1 s, no output)',
      ...pair((r) => String(r.phantomTestExits ?? 0)),
      '',
    ]);
    for (const phase of PHASES) {
      const some = phase in PHASE_APPLIES;
      rows.push([
        `  overhead in ${phase}, median${some ? ' (trials that have it)' : ''}`,
        ...pair((r) => {
          const d = r.phaseOverheadMs?.[phase];
          return some ? `${ms(d?.median)} (${d?.n ?? 0})` : ms(d?.median);
        }),
        '',
      ]);
    }
    out.push(...table(rows));
    const cmp = ev.comparison;
    if (cmp) {
      out.push('');
      out.push(
        ...table([
          [`trials per minute, tasks ${cmp.reference.tasks.join(', ')}`, 'now', 'reference', 'ratio'],
          [
            `concurrency ${cmp.run.concurrency}, -n ${cmp.run.n} (reference: -n ${cmp.reference.n}, ${cmp.reference.file})`,
            String(cmp.run.trialsPerMinute),
            String(cmp.reference.trialsPerMinute),
            `${cmp.trialsPerMinuteRatio.toFixed(2)}x`,
          ],
          ['harness overhead per trial, median (p90)', withP90(cmp.run.overheadMs), '', ''],
        ]),
      );
    }
  }
  const v = results.view;
  if (v) {
    if (out.length) out.push('');
    const kb = (/** @type {number} */ bytes) => `${(bytes / 1024).toFixed(1)} KB`;
    const browser = v.browserLoad;
    out.push(
      ...table([
        ['viewer (offline example, eval -n ' + results.options.evalN + ')', 'median', 'p90', 'size'],
        [
          'exported pages (`<out>/view/`, written by eval)',
          '',
          '',
          `${v.export.pages} pages, ${kb(v.export.bytes)}`,
        ],
        [`largest page: \`${v.export.largest.path}\``, '', '', kb(v.export.largest.bytes)],
        row('server: GET of the largest page (read, render, send)', v.serverGet.largest),
        row('server: GET of index.html (the trial list)', v.serverGet.index),
        ...(browser.skipped
          ? [['Chromium load of the largest page', '-', '-', `skipped: ${browser.skipped}`]]
          : [
              row('Chromium: index -> largest page, served, to load event', browser.served),
              row('Chromium: index -> largest page, exported (file://), to load event', browser.exported),
            ]),
      ]),
    );
  }
  const fl = results.fleet;
  if (fl) {
    if (out.length) out.push('');
    const gb = (/** @type {number} */ bytes) => `${(bytes / 1e9).toFixed(2)} GB`;
    const faster = (/** @type {{ faster: string, shipToBuild: { median: number | null } }} */ m) =>
      `${m.faster} (ship = ${times(m.shipToBuild.median, 'build')})`;
    out.push(
      ...table([
        ['images on a fresh engine (source: the local engine)', 'median', 'p90', 'faster'],
        row(`base image, ship: save/load stream (${gb(fl.base.shipBytes)})`, fl.base.ship, faster(fl.base)),
        row('base image, build there (registry, else offline bootstrap)', fl.base.build, ''),
        row(`repo image, ship with its base tag (${gb(fl.repo.shipBytes)})`, fl.repo.ship, faster(fl.repo)),
        row('repo image, build there (engine has the base image)', fl.repo.build, ''),
        ['fresh engine started and answering over TLS', ms(fl.engine.startMs), '', ''],
      ]),
    );
    out.push(
      `(${fl.reps} repetition(s) per method; defaults in src/sandbox/docker/images/image-shipping.ts: base ${fl.defaults.base}, repo ${fl.defaults.repo}${fl.defaultsMatchMeasurement ? ', as measured' : ' — NOT what was measured faster'})`,
    );
  }
  const fe = results.fleetEval;
  if (fe) {
    if (out.length) out.push('');
    const { local, fleet } = fe;
    const x = (/** @type {number | null} */ r) => (r === null ? '' : `${r.toFixed(2)}x`);
    out.push(
      ...table([
        [
          `eval over engines (same concurrency ${fe.concurrency})`,
          'local engine',
          '3 engines',
          'ratio (3 / 1)',
        ],
        ['trials (all runs)', String(local.trials), String(fleet.trials), ''],
        [
          'trials per minute, median',
          String(local.trialsPerMinute.median),
          String(fleet.trialsPerMinute.median),
          x(fe.fleetToLocal.trialsPerMinute),
        ],
        ['eval wall time, median', ms(local.wallTimeMs.medianMs), ms(fleet.wallTimeMs.medianMs), ''],
        [
          'trial wall time, median of run medians',
          ms(local.trialMedianMs.medianMs),
          ms(fleet.trialMedianMs.medianMs),
          x(fe.fleetToLocal.trialMedian),
        ],
        [
          'harness overhead per trial, median of run medians',
          ms(local.overheadMedianMs.medianMs),
          ms(fleet.overheadMedianMs.medianMs),
          x(fe.fleetToLocal.overheadMedian),
        ],
        ['cold fleet eval -n 1 (repo images built on fresh engines)', '', ms(fe.cold.wallTimeMs), ''],
        ['two fresh engines started, base image shipped to both', '', ms(fe.enginesReadyMs), ''],
      ]),
    );
    out.push(
      `(${fe.reps} pair(s) of evals -n ${fe.n}, alternating; ratio < 1 in trials per minute: the fleet is slower)`,
    );
  }
  const rt = results.runtimes;
  if (rt) {
    if (out.length) out.push('');
    const sides = ['runc', 'runsc', 'podman', 'userns'].filter((side) =>
      Object.values(rt).some((/** @type {Record<string, unknown>} */ r) => r[side]),
    );
    const labels = /** @type {Record<string, string>} */ ({
      createToReady: 'create-to-ready',
      channelCall: 'tool call over the channel',
      freeze: 'freeze',
      changePath: 'change path (100 files: changes + export)',
      testCommand: "example's test command",
      trial: 'whole eval trial',
    });
    const cell = (/** @type {any} */ r, /** @type {string} */ side) => {
      if (!r[side]) return '';
      const vs = side === 'runc' ? undefined : r[`${side}VsRunc`]?.median;
      return `${ms(r[side].medianMs)}${vs == null ? '' : ` (${vs.toFixed(2)}x)`}`;
    };
    out.push(
      ...table([
        ['runtime row (median, ratio to runc)', ...sides, ''],
        ...Object.entries(rt).map(([key, r]) => [
          labels[key] ?? key,
          ...sides.map((side) => cell(r, side)),
          '',
        ]),
      ]),
    );
  }
  const br = results.bridge;
  if (br) {
    if (out.length) out.push('');
    const c = br.calls;
    const over = (/** @type {number} */ value, /** @type {string} */ what) =>
      `+${value.toFixed(1)} ms over ${what}`;
    out.push(
      ...table([
        ['model bridge', 'median', 'p90', 'note'],
        row('host: one small model call, straight to the model server', c.direct, ''),
        row(
          'host: the same through the relay and the bridge',
          c.localRelay,
          over(c.overheadMs.localRelay, 'straight'),
        ),
        row('sandbox (no network): to a model server inside it', c.sandboxDirect, ''),
        row(
          'sandbox: to the host server via relay, exec stream, bridge',
          c.sandbox,
          `${over(c.overheadMs.sandbox, 'inside')} (goal: under ${c.goalMs} ms)`,
        ),
        ...Object.entries(br.agents).flatMap(([name, a]) => [
          row(
            `${name} ${a.version}: exec to its first model call`,
            a.firstCall,
            `${a.firstCall.n} session(s)`,
          ),
          row(`${name} ${a.version}: one-turn session, exec to exit`, a.session, ''),
        ]),
      ]),
    );
  }
  const sl = results.slurm;
  if (sl) {
    if (out.length) out.push('');
    const c = sl.createToReady;
    const t = sl.trials;
    const tpm = (/** @type {any} */ r) =>
      `${r.trialsPerMinute} trials/min (${r.trials} in ${(r.wallTimeMs / 1000).toFixed(1)} s)`;
    const perTrial = (/** @type {any} */ r) =>
      `trial ${ms(r.trialMs.median)}, test ${ms(r.testMs.median)}, overhead ${ms(r.overheadMs.median)}`;
    out.push(
      ...table([
        ['slurm backend', 'median', 'p90', 'note'],
        row('create-to-ready through slurm (job + container + step)', c.slurm, `${c.ratio.median}x local`),
        row('  of which queue wait (onQueued)', c.slurmQueueWait, ''),
        row('create-to-ready on the local docker backend', c.local, ''),
        [
          `eval over 3 nodes (-n ${t.n}, concurrency ${t.concurrency}, tests sleep)`,
          tpm(t.threeNodes),
          '',
          `${t.speedUp}x one node (goal: ${t.goal}x, ${t.met ? 'met' : 'not met'})`,
        ],
        ['eval over 1 node, same suite', tpm(t.oneNode), '', ''],
        ['eval on the local engine, same suite', tpm(t.local), '', ''],
        ['  per trial over 3 nodes', perTrial(t.threeNodes), '', ''],
        ['  per trial over 1 node', perTrial(t.oneNode), '', ''],
        ['  per trial locally', perTrial(t.local), '', ''],
        [
          'scheduling cost per trial (trial over slurm minus local)',
          ms(sl.schedulingCostPerTrialMs.threeNodes),
          '',
          `3 nodes; 1 node: ${ms(sl.schedulingCostPerTrialMs.oneNode)}`,
        ],
      ]),
    );
  }
  return out;
}

/**
 * @param {string} packageRoot
 * @param {{ date: string, git: { sha: string } }} results what `run.mjs` collected
 */
export async function saveResults(packageRoot, results) {
  const dir = join(packageRoot, 'bench', 'results');
  await mkdir(dir, { recursive: true });
  const name = `${results.date}-${results.git.sha}.json`;
  const text = `${JSON.stringify(results, null, 2)}\n`;
  for (const file of [join(dir, name), join(dir, 'latest.json')]) {
    const temp = `${file}.${process.pid}.tmp`;
    await writeFile(temp, text);
    await rename(temp, file);
  }
  return join(dir, name);
}
