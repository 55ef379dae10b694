/**
 * Commander wiring only: flags, help texts, and which typed command function runs. Each
 * command lives in `cli/commands/` and is loaded on demand, so `--help` stays fast and only
 * the chosen model SDK is ever imported.
 */
import { Command, Option } from 'commander';
import { harnessVersion } from '../version.js';
import type { CliContext } from './context.js';
import type { EvalCommandOptions } from './commands/eval.js';
import { settleProgress } from './progress-line.js';
import { installInterruptHandler } from './signals.js';

export interface Program {
  command: Command;
  /** The exit code the chosen command returned (0 when none ran). */
  exitCode(): number;
}

const EXIT_CODES_HELP = `
Exit codes:
  0    success (fix: ready-for-review or nothing-to-fix)
  1    the task did not succeed (fix: failed, rejected, not-approved, timeout; tests failing; a regression)
  2    bad usage or an invalid catalog, suite, ticket or cassette (an eval with a trial in error)
  3    infrastructure: Docker engine or model API unavailable (an eval with an unscored trial)
  4    fix, apply: a verified fix not written to the repo (not-applied: a file it touches changed)
  70   a fault of sandbox-harness itself (please report it)
  130  interrupted (Ctrl-C)`;

/** A repeatable option's values, in order. */
function collect(value: string, previous: string[] = []): string[] {
  return [...previous, value];
}

/**
 * `exitNow` ends the process at once (a second Ctrl-C, when the first one's clean-up takes
 * too long); only `main.ts` decides how a process exits.
 */
export function buildProgram(exitNow: (code: number) => void): Program {
  let exitCode = 0;
  let controller: AbortController | undefined;
  const context = (): CliContext => {
    controller ??= installInterruptHandler(() => {
      process.stderr.write('second interrupt: exiting now (the host repo was not modified)\n');
      exitNow(130);
    });
    return {
      stdout: process.stdout,
      stderr: process.stderr,
      isTTY: Boolean(process.stderr.isTTY),
      cwd: process.cwd(),
      env: process.env,
      signal: controller.signal,
    };
  };
  const run =
    <A extends unknown[]>(action: (ctx: CliContext, ...args: A) => Promise<number>) =>
    async (...args: A) => {
      try {
        exitCode = await action(context(), ...args);
      } finally {
        // A phase a failed command left live must not redraw over the error message.
        settleProgress();
      }
    };

  const program = new Command('sandbox-harness')
    .description(
      'Let an AI coding agent fix tickets and run evals safely: every tool call and test run happens in a ' +
        'network-disabled, credential-free Docker sandbox built from the target repo, and files come back ' +
        'only when the whole diff matches the catalog allowlist and the tests pass in a fresh sandbox.',
    )
    .version(harnessVersion(), '-V, --version')
    .showHelpAfterError('(run with --help for usage)')
    .addHelpText('after', EXIT_CODES_HELP)
    .exitOverride();

  // ---- the main job ----------------------------------------------------------------
  program
    .command('fix')
    .description('fix a ticket in a sandbox; apply the verified, allowlisted patch to the working tree')
    .argument(
      '<ticket>',
      'a ticket file (markdown, optional front matter id/title), a ticket id (tickets/<id>.md), inline text, or - for stdin',
    )
    .option('-c, --catalog <file>', 'service catalog (default: the only *.yaml in ./catalog/ or here)')
    .option('--repo <dir>', "the service repo (default: the catalog's repo)")
    .addOption(new Option('--provider <name>', 'model provider').choices(['anthropic', 'openai', 'replay']))
    .option('--model <id>', 'model id (provider default otherwise)')
    .option('--cassette <file>', 'replay a recorded conversation (implies --provider replay)')
    .option('--record <file>', 'record the live conversation as a cassette')
    .option('--max-attempts <n>', 'attempts before giving up (1-10; default: the catalog)')
    .option(
      '--cost-limit <usd>',
      "stop once the run's model calls cost this many US dollars (ends `budget`; default: the catalog's agent.costLimit)",
    )
    .option(
      '--continue <run>',
      "start from an earlier run's last attempt: its patch in the first sandbox, its feedback to the model, attempts numbered on",
    )
    .addOption(
      new Option('--keep <policy>', 'keep containers for inspection')
        .choices(['on-failure', 'always', 'never'])
        .default('on-failure'),
    )
    .option(
      '--no-apply',
      'do not write the verified patch to the working tree (it is saved in the run record)',
    )
    .option('--force', 'run even when the tests already pass before any change')
    .option('--rebuild', 'rebuild the sandbox image even when the repo is unchanged')
    .option(
      '--review',
      "review every verified attempt with an independent checker (also the catalog's agent.review); ready-for-review then needs its approval",
    )
    .option('--runs-dir <dir>', 'where run records go (default: <repo>/.sandbox-harness/runs)')
    .option(
      '--runtime <name>',
      "OCI runtime of every sandbox, as the engine names it: runc, runsc (gVisor), ... (default: the catalog's sandbox.runtime, else the engine's default; see doctor)",
    )
    .option('--json', 'print only a JSON summary on stdout')
    .addHelpText(
      'after',
      `
Outcomes: ready-for-review (exit 0), nothing-to-fix (0), failed, rejected, not-approved, timeout, budget (1),
error (2; 70 for a fault of the harness), infrastructure (3), not-applied (4), interrupted (130).
The harness never commits, pushes or deploys. Example:
  sandbox-harness fix OPS-412 --catalog examples/shipping-service/shipping-service.yaml \\
    --cassette examples/shipping-service/cassettes/OPS-412.json`,
    )
    .action(
      run(async (ctx, ticket: string, options: Record<string, unknown>) => {
        const { fixCommand } = await import('./commands/fix.js');
        return fixCommand(ctx, ticket, options);
      }),
    );

  program
    .command('work')
    .description(
      'work a backlog one item at a time (WIP = 1): fix each, apply it, verify it with every earlier item applied; state beside the backlog',
    )
    .argument(
      '<backlog>',
      'backlog file (YAML: catalog, items with id, ticket, catalog?, verify?, dependsOn?, cassette?)',
    )
    .option('--status', 'print the items and their state, and do nothing else')
    .option('--keep-going', 'after a blocked item, go on with the items that do not depend on it')
    .addOption(new Option('--provider <name>', 'model provider').choices(['anthropic', 'openai', 'replay']))
    .option('--model <id>', 'model id (provider default otherwise)')
    .option('--json', 'print the state as JSON on stdout')
    .addHelpText(
      'after',
      `
An item is passing only when its verified patch was applied and its verification (the item's
verify: command, else the catalog's tests) passes in a fresh sandbox of the repo with every
earlier item applied. Anything else makes it blocked, with the reason; work stops there unless
--keep-going. The state file (<backlog>.state.json) is written after every step: a killed work
continues where it was, passing items are never redone. Nothing is committed or pushed.
Exit codes: 0 every item passing, 1 an item blocked or left, 2 a bad backlog or catalog.`,
    )
    .action(
      run(async (ctx, file: string, options: Record<string, unknown>) =>
        (await import('./commands/work.js')).workCommand(ctx, file, options),
      ),
    );

  program
    .command('check')
    .description(
      'preflight a catalog: build the sandbox image with its settings and run the test command once on the untouched repo (no model)',
    )
    .option('-c, --catalog <file>', 'service catalog (default: the only *.yaml in ./catalog/ or here)')
    .option('--repo <dir>', "the service repo (default: the catalog's repo)")
    .option('--rebuild', 'rebuild the sandbox image even when the repo is unchanged')
    .addOption(
      new Option('--expect <tests>', 'what the tests should do on the untouched repo')
        .choices(['failing', 'passing', 'any'])
        .default('failing'),
    )
    .option('--json', 'print only a JSON report on stdout')
    .addHelpText(
      'after',
      `
Reports the image (tag, id, cached or built), the base it was built on, its size, the build
time, each test layer's exit code and duration, and a verdict:
  failing  the tests run and fail: what a ticket needs (fix has something to verify against)
  passing  the tests run and pass: fix would end nothing-to-fix (fine for an eval task whose
           held-out tests decide: --expect passing or any)
  broken   the test command itself did not run the tests (not found, no such npm script, no
           package.json, no tests, the runner cannot start): fix and eval stop there with exit 2
The whole test output and the build log go to <repo>/.sandbox-harness/checks/<id>/.
Exit codes: 0 the tests did what --expect says (default: failing); 1 they did not; 2 broken,
or a bad catalog; 3 Docker unavailable or the image cannot be built.
Example:
  sandbox-harness check --catalog examples/shipping-service/shipping-service.yaml`,
    )
    .action(
      run(async (ctx, options: Record<string, unknown>) =>
        (await import('./commands/check.js')).checkCommand(ctx, options),
      ),
    );

  program
    .command('eval')
    .description(
      'run every task of a suite N times, each trial in fresh containers; write summary.json, report.md, report.html',
    )
    .argument(
      '<suite>',
      'suite file (YAML), SWE-bench-style instances (JSONL), an instance suite (YAML with instances:), a Harbor task folder or a folder of them (task.toml, instruction.md, environment/, tests/), or a Harbor suite (YAML with harbor:)',
    )
    .option('-n, --n <n>', 'trials per task (default: the suite)')
    .option('--repos <dir>', 'instances: the folder of local clones (owner__name, owner/name or name)')
    .option('--visible-tests', 'instances: apply the test patch where the agent sees it (default: held out)')
    .option(
      '--oracle',
      'instances: apply each gold patch instead of calling a model; reports gold patches that fail and tests that flake over -n runs. Harbor tasks: run solution/solve.sh instead',
    )
    .option(
      '--quarantine <file>',
      'instances: with --oracle, write the flaky tests and failing gold patches found there; without, leave them out of FAIL_TO_PASS/PASS_TO_PASS',
    )
    .option(
      '--concurrency <c>',
      'trials at once (default: the suite, else the number of cores; with engines: the sum of their capacities)',
    )
    .option(
      '--engines <file>',
      'run the trials on the engines of an engines file (YAML; see README "Running evals on several machines")',
    )
    .option(
      '--engine <context-or-url>',
      'run trials on this engine too: a docker context name or tcp://, ssh://, unix:// URL (repeatable)',
      collect,
    )
    .option('--out <dir>', 'output folder (default: .sandbox-harness/evals/<suite>-<time>)')
    .option('--resume', 'skip trials already in <out>/results.jsonl (on any engines)')
    .option('--compare <summary.json>', 'compare with a previous summary; exit 1 on a regression')
    .option(
      '--cost-limit <usd>',
      'stop each trial once its model calls cost this many US dollars (the trial ends `budget`)',
    )
    .addOption(
      new Option('--keep <policy>', 'keep trial containers').choices(['on-failure', 'always', 'never']),
    )
    .option(
      '--runtime <name>',
      "OCI runtime of every sandbox, as the engine names it: runc, runsc (gVisor), ... (default: the catalog's sandbox.runtime, else the engine's default; see doctor)",
    )
    .option('--json', 'print only a JSON summary on stdout')
    .addHelpText(
      'after',
      `
Engines: without --engines/--engine every trial runs on the local engine. With them, each
trial goes to the engine with the most free capacity (engines file \`capacity:\`, else CPUs
over the catalogs' CPU limit); images are made present on an engine before its first trial
(base image shipped from the local engine, repo images built there). An infrastructure
failure is retried once, on another engine when there is one; an engine that stops
answering is dropped and its running trials are retried elsewhere. Results, summary.json
and the reports say which engine ran what. Kept containers stay on their engine:
\`inspect\`, \`shell\`, \`rerun-tests\` find it from the run record, \`gc --engines\` cleans up.
Exit codes: 0 every trial scored, no regression; 1 a regression (--compare); 2 a trial ended
in error (bad configuration); 3 a trial could not be scored for infrastructure (or every
engine was lost); 130 interrupted.
Instances (SWE-bench style): each instance's repo is read from its local clone at
base_commit into a fresh working copy under <out>/instances/ (nothing is written to the
clone, nothing is fetched), the test patch is applied held out (or visibly), and a trial
passes when every FAIL_TO_PASS and PASS_TO_PASS test passed in the JUnit report.
Example:
  sandbox-harness eval examples/evals/suite.yaml -n 5 --engines engines.yaml
  sandbox-harness eval instances.jsonl --repos ~/clones --oracle -n 3 --quarantine q.json`,
    )
    .action(
      run(async (ctx, suite: string, options: EvalCommandOptions) => {
        const { evalCommand } = await import('./commands/eval.js');
        return evalCommand(ctx, suite, options);
      }),
    );

  program
    .command('demo')
    .description('run the bundled example (examples/shipping-service, ticket OPS-412) on a temporary copy')
    .addOption(
      new Option('--provider <name>', 'run live with this provider instead of the recorded cassette').choices(
        ['anthropic', 'openai'],
      ),
    )
    .option('--model <id>', 'model id for a live run')
    .option('--review', 'with an independent checker (offline: the cassette with a review round)')
    .addOption(
      new Option('--keep <policy>', 'keep containers')
        .choices(['on-failure', 'always', 'never'])
        .default('on-failure'),
    )
    .option('--json', 'print only the JSON summary of the fix')
    .action(
      run(async (ctx, options: Record<string, unknown>) =>
        (await import('./commands/demo.js')).demoCommand(ctx, options),
      ),
    );

  // ---- inspection ------------------------------------------------------------------
  const where = (command: Command) =>
    command
      .option('--repo <dir>', 'the repo whose runs to read (default: here)')
      .option('-c, --catalog <file>', "read the runs of this catalog's repo")
      .option('--runs-dir <dir>', 'read runs from this folder');
  // A kept container of an eval on several engines is on one of them; the run record says
  // which and how to reach it, and these flags name the engines again when that no longer works.
  const onEngines = (command: Command, what: string) =>
    command
      .option(
        '--engines <file>',
        `${what} on the engines of this engines file (default: as the run record says)`,
      )
      .option('--engine <context-or-url>', `${what} on this engine (repeatable)`, collect);

  where(
    program
      .command('runs')
      .description('list recorded runs: id, ticket, outcome, attempts, duration, tokens'),
  )
    .option('--json', 'JSON output')
    .action(
      run(async (ctx, options: Record<string, unknown>) =>
        (await import('./commands/runs.js')).runsCommand(ctx, options),
      ),
    );

  onEngines(
    where(
      program
        .command('inspect')
        .description(
          'summary, attempts (gate decisions, reviews), a diff, test output and kept containers of a run',
        ),
    ),
    'look for its containers',
  )
    .argument('<run-id>', 'a run id, a unique prefix, or "last"')
    .option(
      '--attempt <n>',
      'show the diff and test output of attempt n (default: the final patch, else the last attempt)',
    )
    .option('--json', 'JSON output')
    .action(
      run(async (ctx, id: string, options: Record<string, unknown>) =>
        (await import('./commands/runs.js')).inspectCommand(ctx, id, options),
      ),
    );

  where(
    program
      .command('export')
      .description(
        "a run's trajectory in a portable format: Harbor's ATIF (steps, tool calls, observations, tokens, cost), or an Inspect AI eval log of a run or of a whole eval",
      ),
  )
    .argument(
      '<run-id>',
      'a run id, a unique prefix, or "last"; with --format inspect also an eval\'s --out folder',
    )
    .addOption(
      new Option(
        '--format <format>',
        "atif: Harbor's trajectory; inspect: Inspect's JSON eval log (a run is one sample; an eval folder is one log, a sample per trial: task = sample id, trial = epoch)",
      )
        .choices(['atif', 'inspect'])
        .default('atif'),
    )
    .option('-o, --out <file>', 'write here (atomically) instead of stdout')
    .addHelpText(
      'after',
      `
Inspect logs: messages are the implementer's attempts in order; events are a model event per call
(its input: the messages new since the call before), a tool event per call, an info event per
attempt verdict and a score event; score "verified" is C for ready-for-review, else I; unscored
trials are samples with an error. Not mapped: tool definitions, the full input of each call, the
checker's conversation as messages (events only), a target answer, the .eval zip flavour.
README: "Trajectories other tools read".`,
    )
    .action(
      run(async (ctx, id: string, options: Record<string, unknown>) =>
        (await import('./commands/export.js')).exportCommand(ctx, id, options),
      ),
    );

  where(
    program.command('logs').description("a run's event log (model calls, tool calls, attempts), readable"),
  )
    .argument('<run-id>', 'a run id, a unique prefix, or "last"')
    .option('--json', 'the events as JSON')
    .option(
      '--verbose',
      'also the whole conversation: model text, tool inputs and results (each cut at 2,000 characters, with a note)',
    )
    .action(
      run(async (ctx, id: string, options: Record<string, unknown>) =>
        (await import('./commands/runs.js')).logsCommand(ctx, id, options),
      ),
    );

  where(
    program
      .command('apply')
      .description(
        "write a verified run's saved change to its repo, with the same checks and atomic apply as fix",
      ),
  )
    .argument('<run-id>', 'a run id, a unique prefix, or "last"')
    .option('--json', 'JSON output')
    .addHelpText(
      'after',
      `
Refused, with nothing written, when a file the change touches is no longer what the run saw
(exit 4, not-applied), when the catalog (--catalog, else the one found here or in the repo,
never the record's) does not allow one of its paths, or when the run's saved change, patch or
record was edited after verification (exit 2).
For a run that ended ready-for-review with --no-apply, or not-applied. Example:
  sandbox-harness apply last`,
    )
    .action(
      run(async (ctx, id: string, options: Record<string, unknown>) =>
        (await import('./commands/apply.js')).applyCommand(ctx, id, options),
      ),
    );

  onEngines(
    where(
      program
        .command('shell')
        .description("an interactive shell in a run's kept container (sandbox user, no network)"),
    ),
    'find the kept container',
  )
    .argument('<run-id>', 'a run id, a unique prefix, or "last"')
    .option('--attempt <n>', 'the kept sandbox of attempt n (default: the last attempt that kept one)')
    .action(
      run(async (ctx, id: string, options: Record<string, unknown>) =>
        (await import('./commands/runs.js')).shellCommand(ctx, id, options),
      ),
    );

  onEngines(
    where(
      program
        .command('rerun-tests')
        .description("run the catalog's test command again in a run's kept container"),
    ),
    'find the kept container',
  )
    .argument('<run-id>', 'a run id, a unique prefix, or "last"')
    .option('--attempt <n>', 'the kept sandbox of attempt n (default: the last attempt that kept one)')
    .option('--json', 'JSON output')
    .action(
      run(async (ctx, id: string, options: Record<string, unknown>) =>
        (await import('./commands/runs.js')).rerunTestsCommand(ctx, id, options),
      ),
    );

  program
    .command('view')
    .description(
      'see what the agent did: a local, read-only web page of runs or eval trials (conversation, gate, diff, test output)',
    )
    .argument(
      '[path]',
      "a repo (its .sandbox-harness/runs/), a runs folder, one run folder, or an eval's output folder (default: the runs here)",
    )
    .option(
      '--export <dir>',
      'write the pages as static, self-contained HTML files into <dir> instead of serving them',
    )
    .option('--port <n>', 'port on 127.0.0.1 (default: any free port)')
    .option('--json', 'print {url, port, token} (or, with --export, what was written) as JSON')
    .addHelpText(
      'after',
      `
The server binds 127.0.0.1 only, needs the random token in the printed URL, opens no
browser and serves until Ctrl-C. Examples:
  sandbox-harness view                                  # the runs of the repo here, after fix
  sandbox-harness view .sandbox-harness/evals/<suite>-<time>   # an eval's trials and report
  sandbox-harness view <out> --export <dir>             # static pages (eval writes <out>/view/ itself)`,
    )
    .action(
      run(async (ctx, path: string | undefined, options: Record<string, unknown>) =>
        (await import('./commands/view.js')).viewCommand(ctx, path, options),
      ),
    );

  where(
    program
      .command('gc')
      .description(
        "remove this tool's leftover containers; kept ones with --run, --older-than or --all; unused repo images with --all",
      ),
  )
    .option(
      '--run <run-id>',
      'only the containers of this run, kept ones included (a run id, a unique prefix, or "last", found like inspect\'s)',
    )
    .option(
      '--older-than <age>',
      'only what is older than this (e.g. 30m, 24h, 7d), kept containers included',
    )
    .option('--all', 'everything this tool created: kept containers and unused repo images too')
    .option('--engines <file>', 'on every engine of this engines file instead of the local one')
    .option('--engine <context-or-url>', 'on this engine instead of the local one (repeatable)', collect)
    .option('--dry-run', 'say what would be removed')
    .option('--json', 'JSON output')
    .addHelpText(
      'after',
      `
Without options, gc removes only orphans: unkept containers whose harness process on this
host is gone. Unkept containers of a harness process that still runs are never removed;
kept ones are (their run is over), when --run, --older-than or --all names them.`,
    )
    .action(
      run(async (ctx, options: Record<string, unknown>) =>
        (await import('./commands/gc.js')).gcCommand(ctx, options),
      ),
    );

  // ---- catalogs --------------------------------------------------------------------
  const catalog = program.command('catalog').description('service catalogs: validate, JSON Schema');
  catalog
    .command('validate')
    .description('validate catalog files; every problem with file:line:col')
    .argument('<file...>', 'catalog files')
    .option('--json', 'JSON output')
    .action(
      run(async (ctx, files: string[], options: Record<string, unknown>) =>
        (await import('./commands/catalog.js')).catalogValidateCommand(ctx, files, options),
      ),
    );
  catalog
    .command('schema')
    .description('print the JSON Schema of catalogs (also in catalog/schema.json)')
    .action(run(async (ctx) => (await import('./commands/catalog.js')).catalogSchemaCommand(ctx)));

  // ---- engine and images -------------------------------------------------------------
  program
    .command('doctor')
    .description(
      'check the Docker engine: reachable, version, storage driver, network-less containers, free disk, base images',
    )
    .option(
      '--engines <file>',
      'check every engine of an engines file (YAML; see README "Running evals on several machines")',
    )
    .option(
      '--engine <context-or-url>',
      'check this engine: a docker context name or tcp://, ssh://, unix:// URL (repeatable)',
      collect,
    )
    .option(
      '--prepare',
      'with --engines/--engine: first ship the base image from the local engine where it is missing',
    )
    .option('--json', 'JSON output')
    .action(
      run(async (ctx, options: Record<string, unknown>) =>
        (await import('./commands/doctor.js')).doctorCommand(ctx, options),
      ),
    );

  program
    .command('setup')
    .description(
      'make the Docker engine answer: on Debian as root, install docker.io and start dockerd; elsewhere say what to do',
    )
    .option(
      '--runtime <name>',
      'also add this runtime to the local engine: runsc (gVisor) installs the Debian package, merges it into /etc/docker/daemon.json, reloads dockerd (SIGHUP) and checks a sandbox runs under it',
    )
    .option('--json', 'JSON output')
    .action(
      run(async (ctx, options: Record<string, unknown>) =>
        (await import('./commands/setup.js')).setupCommand(ctx, options),
      ),
    );

  const images = program
    .command('images')
    .description('sandbox base images (registry or offline bootstrap) and repo images (Docker backend only)');
  images
    .command('ensure')
    .description('make sure a base image exists: reuse, pull + recipe, or bootstrap offline')
    .argument('[kind]', 'node or python', 'node')
    .option('--offline', 'do not try the registry; bootstrap from Debian packages')
    .option('--force', 'make it again even when it exists')
    .option('--json', 'JSON output')
    .action(
      run(async (ctx, kind: string, options: Record<string, unknown>) =>
        (await import('./commands/images.js')).imagesEnsureCommand(ctx, kind, options),
      ),
    );
  images
    .command('bootstrap')
    .description('build a base image offline from Debian packages (mmdebstrap + docker import + recipe)')
    .argument('[kind]', 'node or python', 'node')
    .option('--force', 'rebuild even when the image exists')
    .option('--json', 'JSON output')
    .action(
      run(async (ctx, kind: string, options: Record<string, unknown>) =>
        (await import('./commands/images.js')).imagesBootstrapCommand(ctx, kind, options),
      ),
    );
  images
    .command('list')
    .description("list this tool's images")
    .option('--json', 'JSON output')
    .action(
      run(async (ctx, options: Record<string, unknown>) =>
        (await import('./commands/images.js')).imagesListCommand(ctx, options),
      ),
    );

  program
    .command('exec')
    .description('run one command in a fresh sandbox built from a repo (a smoke test of the sandbox)')
    .argument('<command...>', 'the command; put -- before it')
    .option('--repo <dir>', 'repo to build the sandbox from (default: here)')
    .option('--image <image>', 'use this image instead of building one')
    .option(
      '-c, --catalog <file>',
      "build and run the sandbox as this catalog's runs do (recipe, base image, build options, env, limits; repo: the catalog's)",
    )
    .option(
      '--base-image <ref>',
      'build on this base image (e.g. sandbox-harness/base-python:3), as sandbox.baseImage would',
    )
    .option('--rebuild', 'rebuild the image')
    .option('--timeout <sec>', 'command timeout in seconds', '120')
    .option(
      '--runtime <name>',
      "OCI runtime of every sandbox, as the engine names it: runc, runsc (gVisor), ... (default: the catalog's sandbox.runtime, else the engine's default; see doctor)",
    )
    .option('--json', 'JSON output')
    .addHelpText(
      'after',
      `
Examples:
  sandbox-harness exec --repo ../my-service -- npx vitest run
  sandbox-harness exec --catalog catalog/my-service.yaml -- npm test
  sandbox-harness exec --repo ../my-py-service --base-image sandbox-harness/base-python:3 -- python -m pytest -q
(\`sandbox-harness images ensure python\` makes the Python base first.)`,
    )
    .action(
      run(async (ctx, command: string[], options: Record<string, unknown>) =>
        (await import('./commands/exec.js')).execCommand(ctx, command, options),
      ),
    );

  return { command: program, exitCode: () => exitCode };
}
