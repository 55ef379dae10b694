/**
 * Harbor tasks into the one task shape every eval runs. Per task, under the eval's out folder
 * (`<out>/harbor/<id>/`): a copy of `environment/` (the build context), the task's Dockerfile
 * line for line with a tail of the harness's (below), a catalog, the ticket (instruction.md)
 * and, for `--oracle`, a cassette that runs `solution/solve.sh`. Downstream sees an ordinary
 * suite.
 *
 * What the agent may change: the environment's working directory (its final WORKDIR, where
 * Harbor's agents start), every file in it. The tail moves it to /workspace and leaves a link
 * at the old path, so the task's absolute paths (`/app/...`) still work. Only that folder
 * carries over into verification: a fresh sandbox from the pristine image plus exactly the
 * agent's change, with `tests/` placed at /tests (never in the agent's sandbox), `test.sh`
 * run, and the reward read back by the host. Changes elsewhere in the container (packages
 * installed, files outside the working directory) do not carry over.
 *
 * The mapping, field by field: verifier.timeout_sec -> the test timeout (default 600 s, as
 * Harbor's), agent.timeout_sec -> the attempt's time, environment.build_timeout_sec -> the
 * image build's limit (default 600 s, as Harbor's; a build past it names the field), cpus / memory_mb / storage_mb -> the
 * sandbox's CPUs, memory and disk budget (Harbor's defaults 1, 2048 MB and 10240 MB when
 * absent), environment.env / verifier.env / solution.env -> variables of the sandbox, the test
 * command and the oracle (never a host variable), network per phase -> network none, or egress
 * by name for `allowlist`; public internet (Harbor's default) is never given: such a task runs
 * with network none and is marked so.
 */
import { constants } from 'node:fs';
import { lstat, mkdir, open, readdir, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { isIP } from 'node:net';
import { ConfigError } from '../../errors.js';
import { shellQuote } from '../../sandbox/shell.js';
import type { Suite, SuiteDefaults, SuiteTask } from '../suite.js';
import type { HarborTask, TaskToml } from './harbor.js';
import { sha256 } from '../../changes/hash.js';

/** The workspace folder the test command copies the reward into; the host reads it from there. */
export const REWARD_DIR = '.harbor-verifier';
/** Where an oracle run unpacks solution/ (the image links /solution to it). */
const SOLUTION_DIR = '/tmp/sandbox-harness-solution';
/** The generated Dockerfile's name, next to the catalog (outside the build context). */
const DOCKERFILE = 'harbor-environment.Dockerfile';

export const HARBOR_DEFAULTS = {
  verifierSec: 600,
  buildSec: 600,
  cpus: 1,
  memoryMb: 2048,
  storageMb: 10240,
} as const;

const COPY_LIMITS = { files: 20_000, bytes: 512 * 1024 * 1024 };
/** A solution travels inside one command (one exec argument): small, as solve.sh files are. */
const SOLUTION_MAX_BYTES = 64 * 1024;

export interface HarborSource {
  /** Absolute: the task folder, the folder of task folders, or the suite file. */
  file: string;
  name: string;
  tasks: HarborTask[];
  /** A folder with `<task id>.json` cassettes (a recorded model per task). */
  cassettes?: string;
  defaults: SuiteDefaults;
}

export interface MaterializeHarborOptions {
  outDir: string;
  oracle?: boolean;
  onLine?: (line: string) => void;
}

/** What each task's mapping said that a reader must know (network not given, user not honoured). */
export interface HarborSummary {
  oracle: boolean;
  /** Per task: notes of the mapping (marked, not refused). */
  marks: Record<string, string[]>;
}

export async function materializeHarbor(
  source: HarborSource,
  options: MaterializeHarborOptions,
): Promise<{ suite: Suite; summary: HarborSummary }> {
  const problems: string[] = [];
  const mapped: Array<{ task: HarborTask; mapping: Mapping }> = [];
  for (const task of source.tasks) {
    const mapping = mapTask(task);
    if (options.oracle && task.steps)
      for (const step of task.steps.filter((s) => !s.solutionDir))
        mapping.problems.push(
          `no steps/${step.name}/solution/solve.sh, so --oracle has nothing to run there`,
        );
    else if (options.oracle && !task.solutionDir)
      mapping.problems.push('no solution/solve.sh, so --oracle has nothing to run');
    problems.push(...mapping.problems.map((p) => `${task.display}: ${p}`));
    mapped.push({ task, mapping });
  }
  if (problems.length > 0)
    throw new ConfigError(
      [`Harbor tasks refused (${problems.length} problem(s)):`, ...problems.map((p) => `  ${p}`)].join('\n'),
      problems,
    );
  const tasks: SuiteTask[] = [];
  const marks: Record<string, string[]> = {};
  const hashes: string[] = [];
  for (const { task, mapping } of mapped) {
    options.onLine?.(`preparing Harbor task ${task.id} (${task.display})`);
    for (const mark of mapping.marks) options.onLine?.(`  marked: ${mark}`);
    if (mapping.marks.length > 0) marks[task.id] = mapping.marks;
    const made = await materializeOne(
      task,
      mapping,
      path.join(options.outDir, 'harbor', task.id),
      source,
      options,
    );
    tasks.push(made.task);
    hashes.push(made.hash);
  }
  const flags = JSON.stringify({ oracle: options.oracle === true });
  return {
    suite: {
      file: source.file,
      sha256: sha256(`${hashes.join('\n')}\n${flags}`),
      name: source.name,
      defaults: source.defaults,
      tasks,
    },
    summary: { oracle: options.oracle === true, marks },
  };
}

interface Mapping {
  problems: string[];
  marks: string[];
  egress?: { allow: string[]; phases: Array<'agent' | 'baseline' | 'verify'> };
}

type Policy = { kind: 'none' } | { kind: 'allowlist'; hosts: string[] } | { kind: 'public'; why: string };

function phasePolicy(
  phase: { network_mode?: string | undefined; allowed_hosts?: string[] | undefined } | undefined,
  environment: TaskToml['environment'],
): Policy {
  const of = (mode: string | undefined, hosts: string[] | undefined, where: string): Policy | undefined => {
    const m = mode ?? (hosts && hosts.length > 0 ? 'allowlist' : undefined);
    if (m === 'no-network') return { kind: 'none' };
    if (m === 'allowlist') return hosts && hosts.length > 0 ? { kind: 'allowlist', hosts } : { kind: 'none' };
    if (m === 'public') return { kind: 'public', why: `${where}network_mode = "public"` };
    return undefined;
  };
  return (
    of(phase?.network_mode, phase?.allowed_hosts, '') ??
    of(environment?.network_mode, environment?.allowed_hosts, 'environment.') ??
    (environment?.allow_internet === false
      ? { kind: 'none' }
      : {
          kind: 'public',
          why:
            environment?.allow_internet === true
              ? 'environment.allow_internet = true'
              : "no network setting, and Harbor's default is allow_internet = true",
        })
  );
}

/** task.toml's settings as ours, with what must be refused and what is only marked. */
export function mapTask(task: HarborTask): Mapping {
  const c = task.config;
  const problems: string[] = [];
  const marks: string[] = [];
  const agent = phasePolicy(c.agent, c.environment);
  const verifier = phasePolicy(c.verifier, c.environment);
  for (const [name, policy] of [
    ['agent', agent],
    ['verifier', verifier],
  ] as const) {
    if (policy.kind === 'public')
      marks.push(
        `network: the ${name} phase may use the internet under Harbor (${policy.why}); here it runs with network none`,
      );
    if (policy.kind === 'allowlist') {
      const ips = policy.hosts.filter((h) => isIP(h) !== 0);
      if (ips.length > 0)
        problems.push(
          `${name}.allowed_hosts: ${ips.join(', ')}: an address is never allowed by itself here (egress is by host name)`,
        );
    }
  }
  let egress: Mapping['egress'];
  const allowAgent = agent.kind === 'allowlist' ? agent.hosts : undefined;
  const allowVerifier = verifier.kind === 'allowlist' ? verifier.hosts : undefined;
  if (allowAgent && allowVerifier && [...allowAgent].sort().join() !== [...allowVerifier].sort().join())
    problems.push(
      'allowed_hosts differ between the agent and the verifier phases; one list for both is supported',
    );
  else if (allowAgent || allowVerifier) {
    egress = {
      allow: [...(allowAgent ?? allowVerifier ?? [])],
      phases: [
        ...(allowAgent ? (['agent'] as const) : []),
        ...(allowVerifier ? (['baseline', 'verify'] as const) : []),
      ],
    };
  }
  for (const [name, phase] of [
    ['agent', c.agent],
    ['verifier', c.verifier],
  ] as const) {
    if (phase?.user !== undefined && phase.user !== 1000 && phase.user !== 'sandbox')
      marks.push(
        `${name}.user = ${JSON.stringify(phase.user)}: runs as the sandbox user (uid 1000), never root`,
      );
  }
  if (!task.dockerfile && !c.environment?.docker_image)
    problems.push('no environment/Dockerfile and no environment.docker_image');
  return { problems, marks, ...(egress ? { egress } : {}) };
}

/**
 * Appended to the task's Dockerfile (after its last line, so its line numbers stay as they
 * are in every build error). The working directory is whatever the final stage left as the
 * RUN's current folder: the WORKDIR Harbor's agents start in.
 */
export const DOCKERFILE_TAIL = `
# ---- added by sandbox-harness; everything above is the task's environment/Dockerfile, line for line ----
# Its working directory becomes /workspace (what the agent may change), with a link left at the
# old path; /logs is the sandbox user's; /solution is where an oracle run unpacks solution/.
USER root
RUN set -eu; wd="$(pwd)"; \\
    case "$wd" in \\
      /|/bin|/boot|/dev|/etc|/lib|/lib32|/lib64|/proc|/run|/sbin|/sys|/tmp|/usr|/var) \\
        echo "sandbox-harness: the environment's working directory is $wd: a Harbor task needs a WORKDIR of its own (such as WORKDIR /app), the folder the agent works in" >&2; exit 1;; \\
    esac; \\
    if [ "$wd" != /workspace ]; then \\
      if [ -e /workspace ] && [ -n "$(ls -A /workspace)" ]; then \\
        echo "sandbox-harness: /workspace holds files and is not the environment's working directory ($wd)" >&2; exit 1; \\
      fi; \\
      mkdir -p /workspace; cp -a "$wd"/. /workspace/; rm -rf "$wd"; ln -s /workspace "$wd"; \\
    fi; \\
    if [ -e /workspace/${REWARD_DIR} ]; then echo "sandbox-harness: the working directory already holds ${REWARD_DIR}" >&2; exit 1; fi; \\
    chown -R 1000:1000 /workspace; \\
    mkdir -p /logs/verifier /logs/agent; chown -R 1000:1000 /logs; \\
    if [ ! -e /solution ] && [ ! -L /solution ]; then ln -s ${SOLUTION_DIR} /solution; fi
WORKDIR /workspace
`;

function exports(env: Record<string, string> | undefined): string {
  return Object.entries(env ?? {})
    .map(([k, v]) => `export ${k}=${shellQuote(v)}; `)
    .join('');
}

/**
 * The test command: test.sh as Harbor runs it (bash, from the working directory, TEST_DIR set),
 * then the reward files copied as they are (a link stays a link, and the host refuses it) into
 * the workspace, where the host reads them. Its exit code is only a hint for the baseline
 * (full marks or not); the verdict is the host's reading of the file.
 */
export function testCommand(verifierEnv: Record<string, string> | undefined): string {
  const r = REWARD_DIR;
  return [
    `rm -rf /logs/verifier ${r} && mkdir -p /logs/verifier ${r} || exit 2`,
    `(export TEST_DIR=/tests; ${exports(verifierEnv)}cd /workspace && bash /tests/test.sh); status=$?`,
    `for f in reward.txt reward.json; do if [ -e /logs/verifier/$f ] || [ -L /logs/verifier/$f ]; then cp -P /logs/verifier/$f ${r}/$f; fi; done`,
    `echo "sandbox-harness: tests/test.sh exited with $status"`,
    // A link is refused by the host; the hint must not believe it either.
    `if [ -L ${r}/reward.txt ] || [ -L ${r}/reward.json ]; then exit 1; fi`,
    // reward.json first, as the host (and Harbor) reads it.
    `if [ -f ${r}/reward.json ]; then grep -Eq '"reward"[[:space:]]*:[[:space:]]*(1(\\.0*)?|true)([^0-9.]|$)' ${r}/reward.json && exit 0; exit 1; fi`,
    `if [ -f ${r}/reward.txt ]; then awk 'NR == 1 { exit !($1 + 0 >= 1) } END { if (NR == 0) exit 1 }' ${r}/reward.txt && exit 0; fi`,
    'exit 1',
  ].join('\n');
}

function memory(mb: number): string {
  return `${mb}m`;
}

async function materializeOne(
  task: HarborTask,
  mapping: Mapping,
  dir: string,
  source: HarborSource,
  options: MaterializeHarborOptions,
): Promise<{ task: SuiteTask; hash: string }> {
  const c = task.config;
  await mkdir(dir, { recursive: true });
  const contextDir = path.join(dir, 'environment');
  // A resumed eval makes it again from the task folder, as it is now.
  await rm(contextDir, { recursive: true, force: true });
  await mkdir(contextDir, { recursive: true });
  if (task.environmentDir) await copyTree(task.environmentDir, contextDir, `${task.display}/environment`);
  const dockerfile =
    `${task.dockerfile ?? `FROM ${c.environment!.docker_image!}\n`}`.replace(/\n?$/, '\n') + DOCKERFILE_TAIL;
  await writeFile(path.join(dir, DOCKERFILE), dockerfile);

  const agentSec = c.agent?.timeout_sec;
  const buildSec = c.environment?.build_timeout_sec ?? HARBOR_DEFAULTS.buildSec;
  const testSec = c.verifier?.timeout_sec ?? HARBOR_DEFAULTS.verifierSec;
  const attemptSec = agentSec ?? 1800;
  const e = c.environment;
  const memoryMb = e?.memory_mb ?? (e?.memory ? sizeMb(e.memory) : HARBOR_DEFAULTS.memoryMb);
  const storageMb = e?.storage_mb ?? (e?.storage ? sizeMb(e.storage) : HARBOR_DEFAULTS.storageMb);
  const catalog = {
    name: task.id,
    owner: `Harbor task ${task.config.task?.name ?? task.id} (${task.dir})`,
    description: `Made by sandbox-harness from the Harbor task folder ${task.dir}.`,
    repo: 'environment',
    agent: {
      editableFiles: ['**'],
      testCommand: testCommand(c.verifier?.env),
      maxAttempts: 1,
      // The reward the test command copies is the verifier's, never the agent's change.
      ignoreChanges: { add: [`${REWARD_DIR}/**`] },
      docs: [],
      reward: { dir: REWARD_DIR },
      verifierFiles: { from: task.testsDir, to: '/tests' },
    },
    sandbox: {
      dockerfile: DOCKERFILE,
      ...(c.environment?.env && Object.keys(c.environment.env).length > 0 ? { env: c.environment.env } : {}),
      resources: {
        cpus: e?.cpus ?? HARBOR_DEFAULTS.cpus,
        memory: memory(memoryMb),
        diskBytes: memory(storageMb),
      },
      timeouts: {
        commandSec: Math.min(attemptSec, 3600),
        testSec,
        attemptSec,
        buildSec,
        // The run holds a baseline, an attempt and a verification, and the image build before.
        runSec: Math.max(3600, attemptSec + 2 * testSec + 900),
      },
      ...(mapping.egress ? { egress: mapping.egress } : {}),
    },
  };
  if (task.steps) {
    const steps = await materializeSteps(task, dir, testSec, attemptSec);
    const first = steps[0]!;
    // The baseline (and the run's own test command) is the first step's verifier.
    Object.assign(catalog.agent, {
      testCommand: first.testCommand,
      verifierFiles: first.verifierFiles,
      reward: { dir: REWARD_DIR, combine: c.multi_step_reward_strategy ?? 'mean' },
      steps,
    });
    const total = steps.reduce((sum, s) => sum + s.attemptSec + s.testSec, 0);
    catalog.sandbox.timeouts.runSec = Math.max(3600, total + testSec + 900);
  }
  const catalogFile = path.join(dir, 'catalog.yaml');
  // JSON is YAML: the catalog loader reads it with its usual file:line errors.
  await writeFile(catalogFile, `${JSON.stringify(catalog, null, 2)}\n`);
  const ticketFile = path.join(dir, 'ticket.md');
  const body =
    task.instruction.trim() ||
    `Harbor task ${task.id}: ${task.steps?.length ?? 0} step(s), each with its own instruction.`;
  await writeFile(ticketFile, `---\nid: ${JSON.stringify(task.id)}\n---\n${body}\n`);
  const made: SuiteTask = {
    id: task.id,
    catalog: catalogFile,
    ticket: ticketFile,
    repo: contextDir,
    buildLimitFrom: {
      file: `${task.display}/task.toml`,
      field:
        c.environment?.build_timeout_sec !== undefined
          ? 'environment.build_timeout_sec'
          : `environment.build_timeout_sec (absent: Harbor's default, ${HARBOR_DEFAULTS.buildSec} s)`,
    },
  };
  if (options.oracle) {
    const cassette = path.join(dir, 'oracle.json');
    const solutions = task.steps
      ? await Promise.all(
          task.steps.map(async (step) => ({
            label: `${task.id} step ${step.name}`,
            files: await readSolution(step.solutionDir!, `${task.display}/steps/${step.name}/solution`),
          })),
        )
      : [{ label: task.id, files: await readSolution(task.solutionDir!, `${task.display}/solution`) }];
    await writeFile(
      cassette,
      `${JSON.stringify(oracleCassette(task.id, solutions, c.solution?.env, attemptSec), null, 2)}\n`,
    );
    made.cassettes = [cassette];
  } else if (source.cassettes) {
    const recorded = path.join(source.cassettes, `${task.id}.json`);
    if ((await lstat(recorded).catch(() => undefined))?.isFile()) made.cassettes = [recorded];
  }
  return { task: made, hash: sha256(JSON.stringify([catalog, dockerfile, task.instruction])) };
}

function sizeMb(size: string): number {
  const n = Number(size.slice(0, -1));
  const unit = size.slice(-1).toUpperCase();
  return Math.max(1, Math.round(unit === 'G' ? n * 1024 : unit === 'K' ? n / 1024 : n));
}

interface SolutionFile {
  rel: string;
  content: Buffer;
}

async function readSolution(dir: string, display: string): Promise<SolutionFile[]> {
  const files: SolutionFile[] = [];
  let bytes = 0;
  await walk(dir, display, async (rel, content) => {
    bytes += content.length;
    if (bytes > SOLUTION_MAX_BYTES)
      throw new ConfigError(
        `${display}: more than ${SOLUTION_MAX_BYTES} bytes; an oracle run sends the solution in one command`,
      );
    files.push({ rel, content });
  });
  return files;
}

/**
 * A recorded "model" that unpacks solution/ where Harbor puts it (/solution) and runs
 * solve.sh from the working directory: the oracle's change goes through the same gate and
 * verification as any agent's. A multi-step task's has one solution per step, each the
 * whole answer of that step's agent loop (two turns: run it, done).
 */
export function oracleCassette(
  id: string,
  solutions: ReadonlyArray<{ label: string; files: readonly SolutionFile[] }>,
  env: Record<string, string> | undefined,
  timeoutSec: number,
): unknown {
  return {
    version: 1,
    model: `oracle: solution/solve.sh of ${id}`,
    turns: solutions.flatMap((s, i) => oracleTurns(s.label, s.files, env, timeoutSec, i + 1)),
  };
}

function oracleTurns(
  label: string,
  files: readonly SolutionFile[],
  env: Record<string, string> | undefined,
  timeoutSec: number,
  n: number,
): unknown[] {
  const dirs = [...new Set(files.map((f) => path.posix.dirname(f.rel)).filter((d) => d !== '.'))];
  const command = [
    'set -e',
    `rm -rf ${SOLUTION_DIR}`,
    `mkdir -p ${SOLUTION_DIR}`,
    ...dirs.map((d) => `mkdir -p ${shellQuote(`${SOLUTION_DIR}/${d}`)}`),
    ...files.map(
      (f) =>
        `printf '%s' '${f.content.toString('base64')}' | base64 -d > ${shellQuote(`${SOLUTION_DIR}/${f.rel}`)}`,
    ),
    'cd /workspace',
    `${exports(env)}bash /solution/solve.sh`,
  ].join('\n');
  return [
    {
      content: [
        { type: 'text', text: `Running the solution of ${label}.` },
        {
          type: 'tool_use',
          id: `solve-${n}`,
          name: 'run_command',
          input: { command, timeoutSec: Math.min(timeoutSec, 3600) },
        },
      ],
      stopReason: 'tool_use',
      usage: { inputTokens: 0, outputTokens: 0 },
    },
    {
      content: [{ type: 'text', text: 'The solution ran.' }],
      stopReason: 'end_turn',
      usage: { inputTokens: 0, outputTokens: 0 },
    },
  ];
}

/**
 * A multi-step task's steps as catalog `agent.steps`: per step, its ticket (instruction.md)
 * and its tests (the task's tests/ with the step's laid over them, same-named files the
 * step's, as Harbor uploads them) under the task's out folder, its times (the step's, else
 * the task's) and its verifier's variables (the task's with the step's over them).
 */
async function materializeSteps(task: HarborTask, dir: string, testSec: number, attemptSec: number) {
  const c = task.config;
  const made = [];
  for (const [i, step] of task.steps!.entries()) {
    const config = c.steps![i]!;
    const stepDir = path.join(dir, 'steps', step.name);
    const tests = path.join(stepDir, 'tests');
    await rm(stepDir, { recursive: true, force: true });
    await mkdir(tests, { recursive: true });
    if ((await lstat(task.testsDir).catch(() => undefined))?.isDirectory())
      await copyTree(task.testsDir, tests, `${task.display}/tests`);
    if (step.testsDir)
      await copyTree(step.testsDir, tests, `${task.display}/steps/${step.name}/tests`, { overwrite: true });
    const ticket = path.join(stepDir, 'instruction.md');
    const id = `${task.id}.${step.name}`.slice(0, 128);
    await writeFile(ticket, `---\nid: ${JSON.stringify(id)}\n---\n${step.instruction.trim()}\n`);
    const env = { ...c.verifier?.env, ...config.verifier?.env };
    made.push({
      name: step.name,
      ticket: path.relative(dir, ticket),
      testCommand: testCommand(Object.keys(env).length > 0 ? env : undefined),
      verifierFiles: { from: path.relative(dir, tests), to: '/tests' },
      attemptSec: config.agent?.timeout_sec ?? attemptSec,
      testSec: config.verifier?.timeout_sec ?? testSec,
      ...(config.min_reward !== undefined ? { minReward: config.min_reward } : {}),
    });
  }
  return made;
}

/** Regular files and folders only (a link or a device is refused), bounded. */
async function walk(
  root: string,
  display: string,
  onFile: (rel: string, content: Buffer, mode: number) => Promise<void>,
): Promise<void> {
  let count = 0;
  let bytes = 0;
  const visit = async (dir: string): Promise<void> => {
    for (const entry of (await readdir(dir, { withFileTypes: true })).sort((a, b) =>
      a.name < b.name ? -1 : 1,
    )) {
      const full = path.join(dir, entry.name);
      const rel = path.relative(root, full).split(path.sep).join('/');
      if (entry.isDirectory()) {
        await visit(full);
        continue;
      }
      if (!entry.isFile())
        throw new ConfigError(`${display}/${rel}: not a regular file (links and devices are refused)`);
      if (++count > COPY_LIMITS.files)
        throw new ConfigError(`${display}: more than ${COPY_LIMITS.files} files`);
      const handle = await open(full, constants.O_RDONLY | constants.O_NOFOLLOW);
      try {
        const st = await handle.stat();
        bytes += st.size;
        if (bytes > COPY_LIMITS.bytes)
          throw new ConfigError(`${display}: more than ${COPY_LIMITS.bytes} bytes`);
        await onFile(rel, await handle.readFile(), st.mode & 0o777);
      } finally {
        await handle.close();
      }
    }
  };
  await visit(root);
}

/** A copy of `from` into `to`; a file already there is an error, unless `overwrite` (a step's tests over the task's). */
async function copyTree(
  from: string,
  to: string,
  display: string,
  options: { overwrite?: boolean } = {},
): Promise<void> {
  await walk(from, display, async (rel, content, mode) => {
    const target = path.join(to, rel);
    await mkdir(path.dirname(target), { recursive: true });
    // Removed, then written anew ('wx'): a link planted there is never written through.
    if (options.overwrite) await rm(target, { force: true });
    await writeFile(target, content, { mode, flag: 'wx' });
  });
}
