/**
 * Checks of the documentation that need no engine: every shell block is valid shell, every
 * sandbox-harness command in it parses against the program itself (subcommand, flags, option
 * values, arguments: commander's own parser, stopped before the action), every `npm run`
 * script and local script it names exists, every relative link leads to a file and heading,
 * and every block that is not run says why and where its offline equivalent is.
 */
import { execFile } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, normalize } from 'node:path';
import { promisify } from 'node:util';
import type { CommandUnknownOpts } from '@commander-js/extra-typings';
import { buildProgram } from '../../src/cli/index.js';
import {
  harnessArgs,
  headingAnchors,
  relativeLinks,
  roleOf,
  scanShell,
  simpleCommands,
  SHELL_LANGS,
  type DocBlock,
  type DocPage,
} from './doc-pages.js';

const run = promisify(execFile);

class Parsed extends Error {}

function quiet(command: CommandUnknownOpts): void {
  command.configureOutput({ writeOut: () => undefined, writeErr: () => undefined });
  command.exitOverride();
  for (const sub of command.commands) quiet(sub);
}

/**
 * Why `args` would not parse as a sandbox-harness command line, or undefined when it does.
 * The program is the real one; a hook before every action stops it once parsing is done.
 */
export async function harnessParseProblem(args: readonly string[]): Promise<string | undefined> {
  const program = buildProgram(() => undefined).command;
  quiet(program);
  program.hook('preAction', () => {
    throw new Parsed();
  });
  try {
    await program.parseAsync([...args], { from: 'user' });
    return 'ran no command';
  } catch (error) {
    if (error instanceof Parsed) return undefined;
    const code = (error as { code?: unknown }).code;
    if (code === 'commander.helpDisplayed' || code === 'commander.version' || code === 'commander.help')
      return undefined;
    return error instanceof Error ? error.message : String(error);
  }
}

/** Problems of the shell commands of one block: shell syntax, harness flags, scripts and files named. */
export async function blockCommandProblems(root: string, block: DocBlock): Promise<string[]> {
  const problems: string[] = [];
  const where = (line: number): string => `${block.page}:${line}`;
  const syntax = await run('bash', ['-n', '-c', block.body]).then(
    () => undefined,
    (error: { stderr?: string }) => error.stderr?.trim() ?? 'bash -n failed',
  );
  if (syntax) problems.push(`${where(block.line)}: not valid shell: ${syntax}`);
  const scripts = Object.keys(
    (JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { scripts?: Record<string, string> })
      .scripts ?? {},
  );
  for (const command of block.commands) {
    for (const words of simpleCommands(scanShell(command.text).code)) {
      const args = harnessArgs(words);
      // A command documented to exit 2 may be there to show a usage error.
      if (args && command.expectExit !== 2) {
        const problem = await harnessParseProblem(args);
        if (problem) problems.push(`${where(command.line)}: \`${command.text}\` does not parse: ${problem}`);
        continue;
      }
      if (args) continue;
      const [program, first, second] = words;
      if (program === 'npm' && first === 'run' && second && !scripts.includes(second))
        problems.push(`${where(command.line)}: \`npm run ${second}\`: package.json has no such script`);
      const script =
        program === 'npx' && first === 'tsx'
          ? second
          : program === 'tsx' || program === 'bash' || program === 'sh' || program === 'node'
            ? first
            : undefined;
      if (script && /^(scripts|bench|tests)\//.test(script) && !existsSync(join(root, script)))
        problems.push(`${where(command.line)}: \`${words.join(' ')}\`: ${script} does not exist`);
    }
  }
  return problems;
}

/** The nearest shell block before and after `index` on the page, within the same section. */
function neighbours(page: DocPage, index: number): DocBlock[] {
  const block = page.blocks[index]!;
  const found: DocBlock[] = [];
  for (const step of [-1, 1]) {
    for (let i = index + step; i >= 0 && i < page.blocks.length; i += step) {
      const other = page.blocks[i]!;
      if (other.section !== block.section) break;
      if (SHELL_LANGS.has(other.lang)) {
        found.push(other);
        break;
      }
    }
  }
  return found;
}

/** Problems of a page that do not depend on running anything. */
export async function pageProblems(root: string, page: DocPage): Promise<string[]> {
  const problems = [...page.problems];
  const recipes = new Map<string, { blocks: number; teardown: boolean }>();
  for (const [index, block] of page.blocks.entries()) {
    const role = roleOf(block);
    if (SHELL_LANGS.has(block.lang)) problems.push(...(await blockCommandProblems(root, block)));
    if (role === 'run') {
      for (const command of block.commands) {
        // A run block's command must end with the page: a server left behind outlives the test.
        if (/(^|[^&])&\s*$/.test(scanShell(command.text).code))
          problems.push(
            `${block.page}:${command.line}: a command left running in the background (&) belongs in a recipe block with its teardown`,
          );
      }
    }
    if (block.needs && (block.needs.reason === 'live-model' || block.needs.reason === 'second-machine')) {
      if (!neighbours(page, index).some((b) => roleOf(b) === 'run'))
        problems.push(
          `${block.page}:${block.line}: a block that needs ${block.needs.reason} has its offline equivalent beside it: a bash block that runs, right before or after it in the same section`,
        );
    }
    if (block.runBy) {
      const file = join(root, block.runBy);
      if (!existsSync(file))
        problems.push(`${block.page}:${block.line}: run-by ${block.runBy}: no such file`);
      else if (!readFileSync(file, 'utf8').includes(block.page))
        problems.push(
          `${block.page}:${block.line}: run-by ${block.runBy}: that file never names ${block.page}`,
        );
    }
    if (block.recipe) {
      const r = recipes.get(block.recipe.name) ?? { blocks: 0, teardown: false };
      r.blocks++;
      r.teardown ||= block.recipe.teardown;
      recipes.set(block.recipe.name, r);
    }
  }
  for (const [name, r] of recipes)
    if (!r.teardown)
      problems.push(`${page.path}: recipe ${name} has no teardown block (recipe ${name} teardown)`);
  return problems;
}

/** Relative links that lead nowhere: a missing file, or a heading the target page does not have. */
export function linkProblems(root: string, page: DocPage): string[] {
  const problems: string[] = [];
  for (const { line, target } of relativeLinks(page.text)) {
    const [file, anchor] = target.split('#', 2) as [string, string | undefined];
    if (file === '') {
      if (anchor && !headingAnchors(page.text).has(anchor))
        problems.push(`${page.path}:${line}: link to ${target}: no heading #${anchor} on this page`);
      continue;
    }
    const path = normalize(join(dirname(page.path), decodeURIComponent(file)));
    if (path.startsWith('..') || !existsSync(join(root, path))) {
      problems.push(`${page.path}:${line}: link to ${target}: no such file`);
      continue;
    }
    if (anchor && path.endsWith('.md')) {
      if (!headingAnchors(readFileSync(join(root, path), 'utf8')).has(anchor))
        problems.push(`${page.path}:${line}: link to ${target}: ${path} has no heading #${anchor}`);
    }
  }
  return problems;
}

/** The value of `--flag value` or `--flag=value` among `words`, or undefined. */
function flagValue(words: readonly string[], ...flags: string[]): string | undefined {
  for (let i = 0; i < words.length; i++) {
    for (const flag of flags) {
      if (words[i] === flag) return words[i + 1];
      if (words[i]!.startsWith(`${flag}=`)) return words[i]!.slice(flag.length + 1);
    }
  }
  return undefined;
}

const MAIN_SOCKETS = new Set(['unix:///var/run/docker.sock', 'unix:///run/docker.sock']);

/**
 * Ways a block's commands would change the main engine or another service the user runs:
 * a second dockerd sharing the host's network namespace without a bridge of its own (with
 * `--bridge none` it deletes the host's docker0, moby's removeDefaultBridgeInterface; without
 * `--bridge` it takes over docker0), or sharing the main engine's socket, pid file, roots or
 * configuration; a Podman service on the default socket (it takes the socket from the service
 * already there); the main engine's daemon.json written or dockerd signalled by a block that does
 * not say it needs root for that.
 */
export function machineSafetyProblems(block: DocBlock): string[] {
  const problems: string[] = [];
  const at = (line: number, message: string): void => {
    problems.push(`${block.page}:${line}: ${message}`);
  };
  for (const command of block.commands) {
    const code = scanShell(command.text).code;
    for (const words of simpleCommands(code)) {
      const d = words.indexOf('dockerd');
      if (d >= 0 && words.slice(0, d).every((w) => w !== 'echo' && w !== 'grep')) {
        const before = words.slice(0, d);
        const ownNetns =
          (before.includes('nsenter') && before.some((w) => /^--net(=|$)/.test(w) || w === '-n')) ||
          (before.includes('ip') && before.includes('netns') && before.includes('exec'));
        const args = words.slice(d + 1);
        const bridge = flagValue(args, '--bridge', '-b');
        if (!ownNetns && (bridge === undefined || bridge === 'none' || bridge === 'docker0'))
          at(
            command.line,
            `a second dockerd in the host's network namespace ${bridge === 'none' ? "with --bridge none deletes the host's docker0" : "takes over the host's docker0"}: start it in a network namespace of its own (nsenter --net=/run/netns/NAME) or give it a bridge of its own (--bridge)`,
          );
        const own: [string, string[], (v: string) => boolean][] = [
          ['--data-root', ['--data-root', '-g', '--graph'], (v) => normalize(v) !== '/var/lib/docker'],
          ['--exec-root', ['--exec-root'], (v) => !['/var/run/docker', '/run/docker'].includes(normalize(v))],
          [
            '--pidfile',
            ['--pidfile', '-p'],
            (v) => !['/var/run/docker.pid', '/run/docker.pid'].includes(normalize(v)),
          ],
          ['--config-file', ['--config-file'], (v) => normalize(v) !== '/etc/docker/daemon.json'],
          ['-H unix://...', ['-H', '--host'], (v) => !MAIN_SOCKETS.has(v)],
        ];
        for (const [name, flags, isOwn] of own) {
          const value = flagValue(args, ...flags);
          if (value === undefined || !isOwn(value))
            at(command.line, `a second dockerd needs its own ${name} (it would share the main engine's)`);
        }
      }
      const p = words.indexOf('podman');
      if (p >= 0 && words.includes('system') && words.includes('service')) {
        const uri = words.slice(p).find((w) => /^(unix|tcp):\/\//.test(w));
        if (!uri || uri === 'unix:///run/podman/podman.sock')
          at(
            command.line,
            'a Podman service on the default socket (/run/podman/podman.sock) takes it from the service already there: give it a socket of its own',
          );
      }
    }
    if (!block.needs) {
      if (/(>|\btee\b[^|;&]*)\s*\/etc\/docker\/daemon\.json/.test(code))
        at(
          command.line,
          "writes the main engine's daemon.json: only in a block marked `needs root`, saying so",
        );
      if (
        /\bkill\b.*\/(var\/)?run\/docker\.pid/.test(code) ||
        /\b(systemctl|service)\b.*\bdocker\b/.test(code)
      )
        at(
          command.line,
          'signals or restarts the main engine: only in a block marked `needs root`, saying so',
        );
    }
  }
  return problems;
}
