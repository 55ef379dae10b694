/**
 * Is a failing test run the ticket's bug, or a test command that never ran the tests? A
 * misspelled npm script, a missing `package.json`, a runner that is not installed, a config
 * that does not load, or a command that finds no tests all "fail" exactly like a real bug
 * does, and every attempt would then fail too and burn the model's tokens.
 *
 * A pure function of what one test layer left: its exit code, the tail of its output and
 * the runner it used. It is deliberately conservative: it names a problem only on a pattern
 * the runner prints when it did not run any test, and never when the output shows that
 * tests ran (a summary with counts). A genuinely failing test (an assertion, a test module
 * that cannot import what the ticket is about, a crash in the code under test) is never
 * "broken": an unknown shape is always left to the attempts.
 *
 * The patterns come from the real runners (npm 9 and 11, vitest 2 and 4, jest 29, mocha 10,
 * node:test on Node 20, pytest 9, unittest on Python 3.11 and 3.13); `tests/unit/fix/test-command.test.ts` keeps their output.
 */

export type TestRunner =
  'npm' | 'vitest' | 'jest' | 'mocha' | 'node-test' | 'pytest' | 'unittest' | 'unknown';

export type TestCommandProblemKind =
  | 'command-not-found'
  | 'not-executable'
  | 'missing-script'
  | 'no-package-json'
  | 'no-tests'
  | 'runner-cannot-start';

export interface TestCommandProblem {
  kind: TestCommandProblemKind;
  /** One line, for people: what was wrong, quoting the runner where it helps. */
  reason: string;
}

export interface TestLayerOutcome {
  exitCode: number;
  timedOut?: boolean;
  /** The layer's output (stdout then stderr); only its tail is looked at. */
  output: string;
  runner: TestRunner;
}

/** Test tools a Python test command runs with `python -m` that are never a repo's own module. */
const PYTHON_TEST_TOOLS = new Set([
  'coverage',
  'nose',
  'nose2',
  'green',
  'xmlrunner',
  'unittest2',
  'tox',
  'nox',
  'hatch',
  'django',
]);

/** Bytes of output looked at: a runner that did not start prints little. */
const TAIL_BYTES = 16 * 1024;
/** "No tests" messages are the runner's last words; earlier lines may be anybody's. */
const LAST_LINES = 30;

/** Which runner a test command uses, from the command and (for `npm test`) what npm echoed. */
export function detectRunner(command: string, output = ''): TestRunner {
  const direct = runnerOf(command);
  if (direct !== 'unknown' && direct !== 'npm') return direct;
  // npm echoes the script it runs: "> name@1.0.0 test\n> vitest run".
  for (const echoed of stripAnsi(output.slice(0, 4096)).matchAll(/^> (.+)$/gm)) {
    const viaScript = runnerOf(echoed[1] ?? '');
    if (viaScript !== 'unknown' && viaScript !== 'npm') return viaScript;
  }
  return direct;
}

function runnerOf(command: string): TestRunner {
  if (/\b(?:py\.test|pytest)\b/.test(command)) return 'pytest';
  if (/\bpython[\d.]*\s[^|;&]*?-m\s*unittest\b/.test(command)) return 'unittest';
  if (/\bvitest\b/.test(command)) return 'vitest';
  if (/\bjest\b/.test(command)) return 'jest';
  if (/\bmocha\b/.test(command)) return 'mocha';
  if (/\bnode\b[^|;&]*\s--test\b/.test(command)) return 'node-test';
  if (/\b(?:npm|yarn|pnpm)\b/.test(command)) return 'npm';
  return 'unknown';
}

export function stripAnsi(text: string): string {
  // eslint-disable-next-line no-control-regex
  return text.replace(/\x1b\[[0-9;?]*[A-Za-z]/g, '').replace(/\r/g, '');
}

function tailOf(text: string): string {
  const buffer = Buffer.from(text, 'utf8');
  const cut =
    buffer.length > TAIL_BYTES ? buffer.subarray(buffer.length - TAIL_BYTES).toString('utf8') : text;
  return stripAnsi(cut);
}

function lastLines(text: string, count: number): string {
  return text.trimEnd().split('\n').slice(-count).join('\n');
}

/**
 * The output shows tests that ran: a summary with counts from any runner. Whatever else it
 * says, such a run measured something, so it is the ticket's to fix.
 */
function testsRan(text: string): boolean {
  return [
    /^\s*Test Files\s+\d+ (?:failed|passed)/m, // vitest
    /^\s*Tests?:?\s+\d+ (?:failed|passed)/m, // vitest, jest
    /^Test Suites: .*\d+ (?:failed|passed)/m, // jest
    /^\s*\d+ (?:passing|failing)\b/m, // mocha
    /^# (?:tests|pass|fail) [1-9]\d*$/m, // node:test, TAP
    /^(?:not )?ok \d+ /m, // TAP
    /\b\d+ (?:failed|passed|errors?)\b.* in \d+(?:\.\d+)?s\b/, // pytest summary
    /^collected [1-9]\d* items?/m, // pytest
    /^Ran [1-9]\d* tests? in \d/m, // unittest
  ].some((pattern) => pattern.test(text));
}

function firstMatch(text: string, pattern: RegExp): string | undefined {
  return pattern.exec(text)?.[1];
}

/** A `Require stack:` list: the files that required the missing module, innermost first. */
function requireStack(text: string): string[] | undefined {
  const block = /Require stack:\n((?:- .+\n?)+)/.exec(text);
  if (!block) return undefined;
  return (block[1] ?? '')
    .split('\n')
    .filter((l) => l.startsWith('- '))
    .map((l) => l.slice(2).trim());
}

const RUNNER_CONFIG =
  /(?:^|\/)(?:vitest|vite|jest|babel)\.config\.[cm]?[jt]s$|(?:^|\/)\.mocharc\.[a-z]+$|(?:^|\/)\.vite-temp\/|(?:^|\/)(?:vitest|vite)\.config\.[cm]?[jt]s\.timestamp-/;

function inDependencies(path: string): boolean {
  return /(?:^|\/)node_modules\//.test(path) && !/(?:^|\/)node_modules\/\.vite-temp\//.test(path);
}

/**
 * What was wrong with the test command itself, or undefined when the run may well be the
 * ticket's failing tests (the usual case). `exitCode` 0 is looked at too: a runner that
 * found no tests may still exit 0 (`node --test`, `--passWithNoTests`).
 */
export function classifyTestRun(run: TestLayerOutcome): TestCommandProblem | undefined {
  if (run.timedOut) return undefined;
  const text = tailOf(run.output);
  const last = lastLines(text, LAST_LINES);
  const code = run.exitCode;

  // The shell: the command (or a program the script runs) does not exist or cannot run.
  if (code === 127) {
    const name = firstMatch(last, /(?:^|\n)(?:[^\n:]*: )?(?:\d+: )?([^\s:]+): (?:command )?not found\s*$/m);
    if (name)
      return {
        kind: 'command-not-found',
        reason: `\`${name}\` was not found (exit 127)${packageManagerHint(name)}`,
      };
    const missing = firstMatch(last, /^(?:[^\n:]*: )?(?:\d+: )?([^\s:]+): No such file or directory\s*$/m);
    if (missing) return { kind: 'command-not-found', reason: `\`${missing}\` does not exist (exit 127)` };
  }
  if (code === 126) {
    const name = firstMatch(
      last,
      /^(?:[^\n:]*: )?(?:\d+: )?([^\s:]+): (?:Permission denied|cannot execute[^\n]*)\s*$/m,
    );
    if (name) return { kind: 'not-executable', reason: `\`${name}\` cannot be executed (exit 126)` };
  }

  if (code !== 0) {
    // npm 7+ ("npm ERR!") and npm 10+ ("npm error").
    const script = firstMatch(last, /^npm (?:ERR!|error) Missing script: "([^"]*)"/m);
    if (script !== undefined)
      return { kind: 'missing-script', reason: `package.json has no "${script}" script` };
    if (
      /^npm (?:ERR!|error) (?:code ENOENT|enoent)/m.test(last) &&
      /^npm (?:ERR!|error) (?:enoent |path ).*package\.json/m.test(last)
    ) {
      return { kind: 'no-package-json', reason: 'npm found no package.json in /workspace' };
    }
    const npx = firstMatch(
      last,
      /^npm (?:ERR!|error) npx canceled due to missing packages[^\n]*?: (\[[^\n]*\])/m,
    );
    if (npx)
      return {
        kind: 'runner-cannot-start',
        reason: `npx would have to download ${npx}: it is not installed`,
      };
    if (/^npm (?:ERR!|error) could not determine executable to run/m.test(last)) {
      return { kind: 'runner-cannot-start', reason: 'npx could not determine the executable to run' };
    }
    // `npm init`'s placeholder script.
    if (/^> echo "Error: no test specified" && exit 1$/m.test(text)) {
      return {
        kind: 'no-tests',
        reason: 'the "test" script is npm init\'s placeholder ("Error: no test specified")',
      };
    }
  }

  // Before the summary check: here the counts are of test files that never loaded.
  const typeScript = code !== 0 ? typeScriptNodeCannotLoad(text, run.runner) : undefined;
  if (typeScript) return { kind: 'runner-cannot-start', reason: typeScript };

  if (testsRan(text)) return undefined;

  // No tests: the runner started and found nothing to run.
  const noTests = noTestsFound(last, code, run.runner);
  if (noTests) return { kind: 'no-tests', reason: noTests };
  if (code === 0) return undefined;

  const cannotStart = runnerCannotStart(text, last, code, run.runner);
  if (cannotStart) return { kind: 'runner-cannot-start', reason: cannotStart };
  return undefined;
}

/**
 * `node --test` on TypeScript files with a Node that cannot strip types (Node 20): each file
 * is reported as one failing subtest, with its load error, before any test in it ran. Only
 * when no test passed and there are at least as many such load errors as failures.
 */
function typeScriptNodeCannotLoad(text: string, runner: TestRunner): string | undefined {
  if (runner !== 'node-test' && runner !== 'npm' && runner !== 'unknown') return undefined;
  if (!/^# pass 0$/m.test(text)) return undefined;
  const pattern = /\[ERR_UNKNOWN_FILE_EXTENSION\]: Unknown file extension "(\.[cm]?tsx?)" for (\S+)/g;
  const loadErrors = [...text.matchAll(pattern)];
  const first = loadErrors[0];
  if (!first) return undefined;
  const failures = text.match(/^not ok \d+ - /gm)?.length ?? 0;
  if (failures === 0 || loadErrors.length < failures) return undefined;
  return `node cannot load the TypeScript file ${first[2]} (ERR_UNKNOWN_FILE_EXTENSION "${first[1]}"): the sandbox's Node does not strip types; run the tests through a loader the repo installs (tsx, ts-node) or on a base image with a newer Node`;
}

/**
 * pnpm, yarn and bun are not in the Node base image, and corepack cannot fetch them without
 * network: a repo's scripts that call them need npm's spelling or a recipe that brings them.
 */
function packageManagerHint(name: string): string {
  if (!/^(?:pnpm|pnpx|yarn|yarnpkg|bun|bunx)$/.test(name)) return '';
  return `: the sandbox image has npm but not ${name}; run the runner through npm (\`npx vitest run\`, \`npm run <script>\` of a script that does not call ${name}) or bring ${name} with a Dockerfile.sandbox`;
}

function noTestsFound(last: string, code: number, runner: TestRunner): string | undefined {
  if (/^No test files found, exiting with code \d+/m.test(last)) return 'vitest found no test files';
  if (/^No tests found, exiting with code \d+/m.test(last)) return 'jest found no tests';
  const mocha = firstMatch(last, /^(?:✖ ERROR: |Error: )+No test files found: ?("[^"\n]*")?/m);
  if (mocha !== undefined || /^Error: No test files found\b/m.test(last))
    return `mocha found no test files${mocha ? ` (${mocha})` : ''}`;
  // node --test: "Could not find '<path>'" for a named file or glob that matches nothing.
  const nodePath = firstMatch(last, /^Could not find '([^'\n]+)'$/m);
  if (nodePath && (runner === 'node-test' || runner === 'npm' || runner === 'unknown'))
    return /[*?[{]/.test(nodePath)
      ? `node --test found no test file at ${nodePath}: a Node older than 21 (the base image has Node 20) does not expand a glob given to --test, whatever files exist; let the shell expand it (unquoted) or name a folder`
      : `node --test found no test file at ${nodePath}`;
  if (/^# tests 0$/m.test(last) && /^# pass 0$/m.test(last) && /^# fail 0$/m.test(last))
    return 'node --test ran 0 tests';
  // unittest: Python 3.12+ exits 5 with "NO TESTS RAN"; older ones say "Ran 0 tests" and exit 0.
  if (runner === 'unittest' && /^Ran 0 tests in \d/m.test(last))
    return code === 5 || /^NO TESTS RAN/m.test(last)
      ? 'unittest found no tests (NO TESTS RAN: is the test folder a package, or the -s start folder right?)'
      : 'unittest found no tests (Ran 0 tests)';
  if (runner === 'pytest' && code === 5) {
    const deselected = /\b\d+ deselected\b/.test(last);
    return deselected
      ? 'pytest selected no tests (exit 5: every test was deselected)'
      : 'pytest collected no tests (exit 5)';
  }
  return undefined;
}

function runnerCannotStart(text: string, last: string, code: number, runner: TestRunner): string | undefined {
  if (runner === 'pytest' && code === 4) {
    const unrecognized = firstMatch(text, /^[^\n]*error: (unrecognized arguments:[^\n]*)$/m);
    if (unrecognized) {
      // Usually the config's addopts naming a plugin's option (`--cov`, `-n`) whose plugin is not installed.
      const inifile = firstMatch(text, /^\s+inifile: (\S[^\n]*)$/m);
      return inifile
        ? `pytest could not start: ${unrecognized}, with ${inifile} as its config (exit 4): an option of a plugin that is not installed? (\`-o addopts=""\` drops the config's addopts)`
        : `pytest could not start: ${unrecognized} (exit 4)`;
    }
    const plugins = firstMatch(text, /^ERROR: (Missing required plugins: [^\n]*)$/m);
    if (plugins) return `pytest could not start: ${plugins} (the config's required_plugins; exit 4)`;
    const minversion = firstMatch(text, /^ERROR: ([^\n]*'minversion' requires pytest-[^\n]*)$/m);
    if (minversion)
      return `pytest is older than the config asks: ${minversion.replace(/'$/, '')} (exit 4; the Python base's pytest is the one there is)`;
    if (/^ERROR: (?:usage:|file or directory not found:|not found:)/m.test(text)) {
      const line = firstMatch(text, /^(ERROR: (?:file or directory not found|not found):[^\n]*)$/m);
      return `pytest could not start: ${line ?? 'usage error'} (exit 4)`;
    }
    // Only a package that is not installed: any other error in a conftest may be the code under test.
    const conftest = firstMatch(text, /^ImportError while loading conftest '([^'\n]+)'/m);
    const missing = firstMatch(text, /^E\s+ModuleNotFoundError: (No module named '[^'\n]+')/m);
    if (conftest && missing) return `pytest could not load ${conftest}: ${missing} (exit 4)`;
  }
  // Node itself refused its command line (exit 9): an option the sandbox's Node is too old
  // for (`--experimental-strip-types` on Node 20), so not one test file was loaded.
  const nodeOption =
    code === 9
      ? (firstMatch(last, /^(?:\S*\/)?node: bad option: (\S+)$/m) ??
        firstMatch(last, /^(?:\S*\/)?node: (\S+) is not allowed in NODE_OPTIONS$/m))
      : undefined;
  if (nodeOption)
    return `the sandbox's node does not know the option ${nodeOption} (exit 9): the tests need a newer Node than the sandbox image has (a base image with it: sandbox.baseImage or a Dockerfile.sandbox)`;
  if (/^\S*python[\d.]*: No module named (?:pytest|py\.test)$/m.test(last))
    return 'pytest is not installed in the sandbox';
  // `python -m <tool>` for a test tool the sandbox does not have (the Python base has pytest
  // only). Named tools only: an unknown module may be the repo's own, which a ticket may add.
  const tool = firstMatch(last, /^\S*python[\d.]*: No module named ([a-z][a-z0-9_]*)$/m);
  if (tool && PYTHON_TEST_TOOLS.has(tool))
    return `\`python -m ${tool}\`: No module named ${tool}: it is not installed in the sandbox`;
  // `-p name` (on the command line or in addopts) for a plugin that is not installed.
  const plugin = /^ImportError: Error importing plugin "([^"\n]+)": (No module named '[^'\n]+')$/m.exec(last);
  if (runner === 'pytest' && plugin)
    return `pytest could not load the plugin "${plugin[1]}" (-p): ${plugin[2]}: it is not installed in the sandbox`;
  if (runner === 'unittest') {
    const start = firstMatch(last, /^ImportError: (Start directory is not importable: [^\n]*)$/m);
    if (start) return `unittest could not start: ${start}`;
  }

  const config = firstMatch(text, /^failed to load config from (\S+)/m);
  if (config) return `the vitest/vite config ${config} failed to load`;
  if (/^● Validation Error:/m.test(text)) {
    const detail = firstMatch(text, /^● Validation Error:\n+\s*(\S[^\n]*)/m);
    return `jest's configuration is invalid${detail ? `: ${detail}` : ''}`;
  }
  if (/\breadConfigFileAndSetRootDir\b|\/jest-config\/build\/readConfigFile/.test(text))
    return 'the jest config failed to load';

  // CommonJS: the entry point itself (`node <missing file>`, a runner binary that is not installed).
  const module = firstMatch(text, /^(?:✖ ERROR: )?Error: Cannot find module '([^'\n]+)'$/m);
  const stack = requireStack(text);
  if (module && /requireStack: \[\]/.test(text) && /executeUserEntryPoint|run_main_module/.test(text))
    return `the command's script ${module} does not exist`;
  if (module && stack && stack.length > 0) {
    if (stack.every(inDependencies)) return `a module the test runner needs is missing: ${module}`;
    if (stack[0] && RUNNER_CONFIG.test(stack[0]))
      return `the runner's config ${stack[0]} requires ${module}, which is missing`;
  }
  // ESM: `Cannot find module|package 'x' imported from <file>`.
  const esm =
    /^Error \[ERR_MODULE_NOT_FOUND\]: Cannot find (?:module|package) '([^'\n]+)' imported from (\S+)$/m.exec(
      text,
    );
  if (esm) {
    const [, what, from] = esm;
    if (from && (inDependencies(from) || RUNNER_CONFIG.test(from)))
      return `${what} is missing (imported from ${from})`;
  }
  return undefined;
}
