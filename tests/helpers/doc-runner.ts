/**
 * Runs the docs' commands as a reader would: in a fresh copy of this checkout that went
 * through the documented set-up, with `sandbox-harness` on the PATH. One copy is prepared
 * (files as a clone has them, a git repository of them, `scripts/setup.sh`, `npm link` into a
 * private prefix); each page then gets a copy of that one (its root `node_modules` hard-linked,
 * everything else copied), so pages share the set-up and the engine's images but never each
 * other's files, run records or working tree.
 *
 * What a block means is in doc-pages.ts. Two commands need a driver: `sandbox-harness shell`
 * gets a terminal (script(1)) and a typed line, `sandbox-harness view` (serving) is fetched once
 * and stopped with Ctrl-C. Every command runs in a process group of its own, killed when the
 * command ends or times out, so nothing a command starts outlives it.
 */
import { execFile, spawn } from 'node:child_process';
import { cp, mkdir, readdir, rm, writeFile } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { dockerEngine } from '../../src/sandbox/docker/engine/index.js';
import { LABEL } from '../../src/sandbox/docker/labels.js';
import {
  harnessArgs,
  roleOf,
  scanShell,
  simpleCommands,
  type DocCommand,
  type DocPage,
} from './doc-pages.js';

const run = promisify(execFile);

export interface Ran {
  command: string;
  code: number | null;
  stdout: string;
  stderr: string;
  ms: number;
}

/** The tracked and new (not ignored) files of `from`, as a fresh clone of it would have them. */
export async function copyCheckout(from: string, into: string): Promise<void> {
  const { stdout } = await run('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], {
    cwd: from,
    maxBuffer: 64 * 1024 * 1024,
  });
  for (const file of stdout.split('\0').filter(Boolean)) {
    await mkdir(dirname(join(into, file)), { recursive: true });
    // A file deleted in the working tree but still tracked is not part of the copy.
    await cp(join(from, file), join(into, file), { verbatimSymlinks: true }).catch(
      (error: NodeJS.ErrnoException) => {
        if (error.code !== 'ENOENT') throw error;
      },
    );
  }
  // A clone is a git repository: `git diff` and `git checkout` in the docs work in the copy.
  const git = (...args: string[]) =>
    run('git', ['-c', 'user.name=docs', '-c', 'user.email=docs@example.invalid', ...args], { cwd: into });
  await git('init', '-q');
  await git('add', '-A');
  await git('commit', '-q', '-m', 'a fresh clone');
}

/**
 * A copy of the prepared checkout for one page: `cp -a` keeps every file's time, so the
 * set-up finds nothing stale (no `npm ci`, no build); the root `node_modules` (hundreds of
 * MiB that no page writes and no sandbox image reads) is hard-linked instead of copied.
 */
export async function pageCopy(prepared: string, into: string): Promise<void> {
  await mkdir(into, { recursive: true });
  for (const entry of await readdir(prepared)) {
    const args = entry === 'node_modules' ? ['-al'] : ['-a'];
    await run('cp', [...args, join(prepared, entry), join(into, entry)]);
  }
}

export function killGroup(pid: number | undefined): void {
  if (!pid) return;
  try {
    process.kill(-pid, 'SIGKILL');
  } catch {
    // the group is gone
  }
}

/** bash running `command` in a process group of its own, its output collected into `out`. */
function startBash(cwd: string, command: string, env: NodeJS.ProcessEnv, stdin: 'pipe' | 'ignore') {
  const child = spawn('bash', ['-c', command], { cwd, env, stdio: [stdin, 'pipe', 'pipe'], detached: true });
  const out = { stdout: '', stderr: '' };
  child.stdout!.on('data', (d: Buffer) => (out.stdout += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (out.stderr += d.toString()));
  return { child, out };
}

/** Runs `command` with bash in a process group of its own; `input` is typed on stdin. */
export function runCommand(
  cwd: string,
  command: string,
  env: NodeJS.ProcessEnv,
  options: {
    input?: string;
    timeoutMs?: number;
    /** Leave what the command started in the background running (a recipe's engine); see `groupMembers`. */
    leaveGroup?: boolean;
    onStart?: (pgid: number) => void;
  } = {},
): Promise<Ran> {
  const started = Date.now();
  return new Promise((resolve) => {
    const { child, out } = startBash(cwd, command, env, 'pipe');
    // A command that exits without reading its input closes the pipe first: EPIPE here is
    // not the command's result.
    child.stdin!.on('error', () => undefined);
    child.stdin!.end(options.input ?? '');
    if (child.pid) options.onStart?.(child.pid);
    const timer = setTimeout(() => {
      out.stderr += `\n[doc test: no exit after ${options.timeoutMs} ms; killed]\n`;
      killGroup(child.pid);
    }, options.timeoutMs ?? 600_000);
    child.on('close', (code) => {
      clearTimeout(timer);
      if (!options.leaveGroup) killGroup(child.pid);
      resolve({ command, code, ...out, ms: Date.now() - started });
    });
  });
}

/**
 * The live processes of process group `pgid`, as `pid command line`. A zombie has exited: only
 * its parent (here often a process that never reaps, since the shell that started it is gone)
 * can remove it from the table.
 */
export async function groupMembers(pgid: number): Promise<string[]> {
  const { stdout } = await run('ps', ['-eo', 'pid=,pgid=,stat=,args=']);
  return stdout
    .split('\n')
    .map((line) => /^\s*(\d+)\s+(\d+)\s+(\S+)\s+(.*)$/.exec(line))
    .filter((m): m is RegExpExecArray => m !== null && Number(m[2]) === pgid && !m[3]!.startsWith('Z'))
    .map((m) => `${m[1]} ${m[4]}`);
}

/**
 * A command that serves until Ctrl-C: waits for the URL it prints, fetches it (the page goes
 * into stdout after a marker), then interrupts it as a user would.
 */
export function serveFetchAndStop(cwd: string, command: string, env: NodeJS.ProcessEnv): Promise<Ran> {
  const started = Date.now();
  return new Promise((resolve) => {
    const { child, out } = startBash(cwd, `exec ${command}`, env, 'ignore');
    let fetched = false;
    const timer = setTimeout(() => {
      out.stderr += '\n[doc test: no URL within 60 s; killed]\n';
      killGroup(child.pid);
    }, 60_000);
    child.stdout!.on('data', () => {
      const url = /^(http:\/\/127\.0\.0\.1:\d+\/\S*)$/m.exec(out.stdout)?.[1];
      if (!url || fetched) return;
      fetched = true;
      void fetch(url)
        .then(async (res) => `\n--- page (HTTP ${res.status}) ---\n${await res.text()}`)
        .catch((error: unknown) => `\n--- page: ${String(error)} ---\n`)
        .then((page) => {
          out.stdout += page;
          child.kill('SIGINT');
        });
    });
    child.on('close', (code) => {
      clearTimeout(timer);
      killGroup(child.pid);
      resolve({ command, code, ...out, ms: Date.now() - started });
    });
  });
}

/** What `sandbox-harness shell` is given to type: where it is, as whom, with which interfaces; then `exit`. */
export const SHELL_PROBE =
  'echo "uid=$(id -u) pwd=$(pwd) ifaces=$(ls /sys/class/net | tr "\\n" " ")"; exit\n';

/** `text` as one word for bash, whatever it holds. */
export const shellQuote = (text: string): string => `'${text.replace(/'/g, `'\\''`)}'`;

/** The driver a command needs, from the sandbox-harness subcommand it runs. */
export function driverOf(command: DocCommand): 'shell' | 'serve' | 'plain' {
  for (const words of simpleCommands(scanShell(command.text).code)) {
    const args = harnessArgs(words);
    if (args?.[0] === 'shell') return 'shell';
    if (args?.[0] === 'view' && !args.includes('--export')) return 'serve';
  }
  return 'plain';
}

export async function runDocCommand(cwd: string, command: DocCommand, env: NodeJS.ProcessEnv): Promise<Ran> {
  switch (driverOf(command)) {
    case 'serve':
      return serveFetchAndStop(cwd, command.text, env);
    case 'shell':
      // A terminal for the shell; the typed line answers the checks of `resultProblem`.
      return runCommand(cwd, `script -qec ${shellQuote(scanShell(command.text).code)} /dev/null`, env, {
        input: SHELL_PROBE,
      });
    case 'plain':
      return runCommand(cwd, command.text, env);
  }
}

/** Why a command's result is not what the page says, or undefined. */
export function resultProblem(
  command: DocCommand,
  ran: Ran,
  prints: { pattern: RegExp }[],
): string | undefined {
  const output = `${ran.stdout}\n${ran.stderr}`;
  if (ran.code !== command.expectExit) return `exit ${ran.code}, the page expects ${command.expectExit}`;
  for (const p of prints)
    if (!p.pattern.test(output)) return `its output does not match ${String(p.pattern)}`;
  const driver = driverOf(command);
  if (driver === 'serve' && !/--- page \(HTTP 200\) ---\n<!doctype html>/i.test(ran.stdout))
    return 'the page it serves did not answer 200 with HTML';
  if (driver === 'shell') {
    // The kept container, as promised: the sandbox user, the workspace, no interface but lo.
    if (!/uid=1000 pwd=\/workspace ifaces=lo\s*$/m.test(ran.stdout))
      return `the shell is not the sandbox's (uid 1000 in /workspace, only lo): ${ran.stdout.slice(-300)}`;
  }
  return undefined;
}

export interface PageResult {
  page: string;
  ran: Ran[];
  ms: number;
}

const tail = (text: string, n = 3000): string => (text.length > n ? `...${text.slice(-n)}` : text);

/**
 * Runs every run block of `page` in `cwd`, in order, writing its file blocks as it reaches
 * them; throws at the first command whose exit code or output is not what the page says
 * (what comes after may depend on it). `onRan` sees every command's result.
 */
export async function runPage(
  page: DocPage,
  cwd: string,
  env: NodeJS.ProcessEnv,
  onRan: (ran: Ran) => void = () => undefined,
): Promise<PageResult> {
  const started = Date.now();
  const ran: Ran[] = [];
  for (const block of page.blocks) {
    const role = roleOf(block);
    if (role === 'file') {
      await mkdir(dirname(join(cwd, block.file!)), { recursive: true });
      await writeFile(join(cwd, block.file!), `${block.body}\n`);
      continue;
    }
    if (role !== 'run') continue;
    for (const command of block.commands) {
      const result = await runDocCommand(cwd, command, env);
      ran.push(result);
      onRan(result);
      const prints = block.prints.filter(
        (p) => block.commands.find((c) => c.text.startsWith(p.prefix)) === command,
      );
      const problem = resultProblem(command, result, prints);
      if (problem)
        throw new Error(
          `${page.path}:${command.line}: ${command.text}\n${problem}\n--- stdout ---\n${tail(result.stdout)}\n--- stderr ---\n${tail(result.stderr)}`,
        );
    }
  }
  return { page: page.path, ran, ms: Date.now() - started };
}

async function runJsons(dir: string, out: string[] = []): Promise<string[]> {
  for (const entry of await readdir(dir, { withFileTypes: true }).catch(() => [])) {
    if (entry.name === 'node_modules' || entry.name === '.git') continue;
    const path = join(dir, entry.name);
    if (entry.isDirectory()) await runJsons(path, out);
    else if (entry.name === 'run.json') out.push(path);
  }
  return out;
}

/**
 * Removes what the runs recorded under `copy` left on the engine (kept containers of a page
 * that failed midway, or that keeps them on purpose), through `gc --run` as a user would:
 * only those runs' containers, never anything else on the engine.
 */
export async function gcRunsUnder(copy: string, env: NodeJS.ProcessEnv): Promise<void> {
  for (const file of await runJsons(copy)) {
    const runDir = dirname(file);
    const id = basename(runDir);
    if ((await dockerEngine().containers.list({ [LABEL.run]: id })).length === 0) continue;
    await runCommand(
      copy,
      `sandbox-harness gc --run ${JSON.stringify(id)} --runs-dir ${JSON.stringify(dirname(runDir))}`,
      env,
    );
  }
}

export async function removeQuietly(path: string): Promise<void> {
  await rm(path, { recursive: true, force: true }).catch(() => undefined);
}
