/**
 * Third-party agent CLIs for the model bridge's Docker tests: installed from the npm registry
 * on the host (never inside a sandbox; their install scripts never run), cached by package and
 * version under node_modules/.cache, and copied root-owned into an image layer on top of a
 * repo image, built with no network. Also what each CLI needs to run inside a sandbox with
 * no network against the bridge's loopback endpoint (checked by hand and recorded in the
 * findings: base URL, placeholder key, telemetry, update checks and onboarding off).
 *
 * This is the test-side stand-in for the agent-kind layer that `fix` will get; it pins the
 * versions the tests were written against.
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { cp, mkdir, mkdtemp, rename, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { ROOT } from './cli.js';

const run = promisify(execFile);

export interface AgentCli {
  name: 'claude-code' | 'codex';
  /** The npm package and version installed. */
  pkg: string;
  version: string;
  /** Inside the installed prefix: the folder copied into the image (the native build). */
  nativeDir: string;
  /** The executable, relative to `nativeDir`. */
  bin: string;
}

export const CLAUDE_CODE: AgentCli = {
  name: 'claude-code',
  pkg: '@anthropic-ai/claude-code',
  version: '2.1.332',
  // The package's postinstall copies this over bin/claude.exe; the binary alone is the CLI.
  nativeDir: 'node_modules/@anthropic-ai/claude-code-linux-x64',
  bin: 'claude',
};

export const CODEX: AgentCli = {
  name: 'codex',
  pkg: '@openai/codex',
  version: '0.171.0',
  // A static musl build; the package's bin/codex.js only picks it and execs it.
  nativeDir: 'node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl',
  bin: 'bin/codex',
};

/** Where the CLIs live in the image: root-owned, read-only to the sandbox user. */
export const AGENTS_DIR = '/opt/sandbox-harness/agents';

const CACHE = join(ROOT, 'node_modules', '.cache', 'sandbox-harness-agent-clis');

/** The CLI installed on the host (from the npm registry, install scripts off), cached. */
export async function installAgentCli(cli: AgentCli): Promise<string> {
  const prefix = join(CACHE, `${cli.name}@${cli.version}`);
  if (existsSync(join(prefix, cli.nativeDir, cli.bin))) return prefix;
  await mkdir(CACHE, { recursive: true });
  const staging = await mkdtemp(join(CACHE, `.${cli.name}-`));
  try {
    await run(
      'npm',
      [
        'install',
        '--ignore-scripts',
        '--no-audit',
        '--no-fund',
        '--no-save',
        '--prefix',
        staging,
        `${cli.pkg}@${cli.version}`,
      ],
      { maxBuffer: 16 * 1024 * 1024, timeout: 600_000 },
    );
    if (!existsSync(join(staging, cli.nativeDir, cli.bin))) {
      throw new Error(
        `${cli.pkg}@${cli.version} installed without ${cli.nativeDir}/${cli.bin} (no linux-x64 build?)`,
      );
    }
    await rm(prefix, { recursive: true, force: true });
    await rename(staging, prefix);
  } finally {
    await rm(staging, { recursive: true, force: true });
  }
  return prefix;
}

async function imageExists(tag: string): Promise<boolean> {
  try {
    await run('docker', ['image', 'inspect', tag]);
    return true;
  } catch {
    return false;
  }
}

/**
 * `baseImage` plus the CLI under AGENTS_DIR/<name> and on PATH, built with no network and
 * cached by CLI version and base image id. Returns the image tag.
 */
export async function agentImage(baseImage: string, cli: AgentCli): Promise<string> {
  const { stdout } = await run('docker', ['image', 'inspect', '--format', '{{.Id}}', baseImage]);
  const baseId = stdout
    .trim()
    .replace(/^sha256:/, '')
    .slice(0, 12);
  const tag = `sandbox-harness-test/agent-${cli.name}:${cli.version}-${baseId}`;
  if (await imageExists(tag)) return tag;
  const prefix = await installAgentCli(cli);
  const context = await mkdtemp(join(tmpdir(), 'agent-layer-'));
  try {
    await cp(join(prefix, cli.nativeDir), join(context, 'agent'), { recursive: true });
    const home = `${AGENTS_DIR}/${cli.name}`;
    await writeFile(
      join(context, 'Dockerfile'),
      [
        `FROM ${baseImage}`,
        'USER root',
        `COPY agent/ ${home}/`,
        // Root-owned and not writable by the sandbox user: a repo cannot replace the agent.
        `RUN chown -R root:root ${AGENTS_DIR} && chmod -R u=rwX,go=rX ${AGENTS_DIR} && ln -s ${home}/${cli.bin} /usr/local/bin/${cli.name === 'claude-code' ? 'claude' : 'codex'}`,
        'USER sandbox',
        '',
      ].join('\n'),
    );
    await run(
      'docker',
      ['build', '--network', 'none', '--label', 'sandbox-harness.test=agent-layer', '-t', tag, context],
      { maxBuffer: 16 * 1024 * 1024, timeout: 900_000 },
    );
  } finally {
    await rm(context, { recursive: true, force: true });
  }
  return tag;
}

/** Environment of Claude Code in a sandbox: the bridge's URL, a placeholder key, nothing phoning home. */
export function claudeEnv(baseUrl: string, model: string, home: string): Record<string, string> {
  return claudeCodeEnv(baseUrl, model, home);
}

/** Claude Code's command line for one task, non-interactive, every tool allowed (the sandbox is the wall). */
export function claudeCommand(task: string, model: string): string {
  return `claude -p ${shellQuote(task)} --model ${shellQuote(model)} --dangerously-skip-permissions --output-format json`;
}

/** Codex's config file: the product's own, so the bridge tests run Codex as `fix` does. */
export { codexConfig } from '../../src/agent-kinds/cli-kinds.js';
import { claudeCodeEnv } from '../../src/agent-kinds/cli-kinds.js';

export function codexEnv(home: string): Record<string, string> {
  return { HOME: home, CODEX_HOME: `${home}/.codex`, OPENAI_API_KEY: 'sandbox-harness-placeholder' };
}

export function codexCommand(task: string): string {
  return `codex exec --skip-git-repo-check --strict-config ${shellQuote(task)} </dev/null`;
}

function shellQuote(value: string): string {
  return `'${value.replace(/'/g, `'\\''`)}'`;
}
