/**
 * The program: the root command and the list of commands. Each command's declaration (its
 * flags and help) and its action live in `cli/commands/<name>.ts`; what an action needs to do
 * its work is loaded when it runs (see `declare-command.ts`), so `--help` stays fast and
 * only the chosen model SDK is ever imported.
 */
import { Command } from '@commander-js/extra-typings';
import { harnessVersion } from '../version.js';
import type { CliContext } from './cli-context.js';
import { addDeclared, type DeclaredCommand, type Runner } from './declare-command.js';
import { settleProgress } from './progress-line.js';
import { installInterruptHandler } from './signals.js';
import { apply } from './commands/apply.js';
import { catalog } from './commands/catalog.js';
import { check } from './commands/check.js';
import { demo } from './commands/demo.js';
import { doctor } from './commands/doctor.js';
import { evalSuite } from './commands/eval.js';
import { exec } from './commands/exec.js';
import { exportRun } from './commands/export.js';
import { fix } from './commands/fix.js';
import { gc } from './commands/gc.js';
import { images } from './commands/images.js';
import { inspect } from './commands/inspect.js';
import { logs } from './commands/logs.js';
import { rerunTests } from './commands/rerun-tests.js';
import { runs } from './commands/runs.js';
import { setup } from './commands/setup.js';
import { shell } from './commands/shell.js';
import { view } from './commands/view.js';
import { work } from './commands/work.js';

/** In the order `--help` lists them: the main job, inspection, catalogs, the engine and images. */
export const COMMANDS: readonly DeclaredCommand[] = [
  fix,
  work,
  check,
  evalSuite,
  demo,
  runs,
  inspect,
  exportRun,
  logs,
  apply,
  shell,
  rerunTests,
  view,
  gc,
  catalog,
  doctor,
  setup,
  images,
  exec,
];

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

/**
 * `exitNow` ends the process at once (a second Ctrl-C, when the first one's clean-up takes
 * too long); only `main.ts` decides how a process exits.
 */
export function buildProgram(exitNow: (code: number) => void): Program {
  let exitCode = 0;
  let controller: AbortController | undefined;
  // Made when a command runs, so that `--help` installs no signal handler.
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
  const run: Runner = async (action) => {
    try {
      exitCode = await action(context());
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
  for (const declared of COMMANDS) addDeclared(program, declared, run);
  return { command: program, exitCode: () => exitCode };
}
