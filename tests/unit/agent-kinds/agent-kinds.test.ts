/**
 * Agent kinds without an engine: names resolved (and refused, with why), each CLI's launch
 * (the bridge's URL and a placeholder key, never a host variable; the off switches), the
 * layer made of the cached packages, the host install with install scripts off, and the
 * catalog's list of names kept equal to the registry's.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { chmod, mkdir, mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AGENT_KIND_NAMES, allAgentKinds, resolveAgentKind } from '../../../src/agent-kinds/kind-registry.js';
import { CLAUDE_CODE, CODEX, codexConfig } from '../../../src/agent-kinds/cli-kinds.js';
import { PLACEHOLDER_KEY } from '../../../src/agent-kinds/agent-kind.js';
import { agentLayer, agentReadiness, layerPackages } from '../../../src/agent-kinds/agent-layer.js';
import { ensureInstalled, packageDir } from '../../../src/agent-kinds/agent-cache.js';
import { BUNDLE_DIR, packageKey, type AgentPackage } from '../../../src/agent-kinds/packages.js';
import { AGENT_KINDS_IN_CATALOG } from '../../../src/catalog/agent-schema.js';
import { AGENT_KINDS } from '../../../src/cli/shared-options.js';
import { ConfigError } from '../../../src/errors.js';

const where = '--agent';
const scratch: string[] = [];
afterEach(async () => {
  for (const dir of scratch.splice(0)) await rm(dir, { recursive: true, force: true });
});
async function tempDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'agent-kinds-'));
  scratch.push(dir);
  return dir;
}

describe('the registry of agent kinds', () => {
  it('the catalog and the CLI offer exactly its names', () => {
    expect([...AGENT_KINDS_IN_CATALOG]).toEqual([...AGENT_KIND_NAMES]);
    expect([...AGENT_KINDS]).toEqual([...AGENT_KIND_NAMES]);
    expect(allAgentKinds().map((k) => k.name)).toEqual([...AGENT_KIND_NAMES]);
  });

  it('resolves builtin with no provider family, and a CLI kind only with the family it speaks', () => {
    expect(resolveAgentKind('builtin', { family: undefined, where }).runs).toBe('loop');
    expect(resolveAgentKind('claude-code', { family: 'anthropic', where })).toBe(CLAUDE_CODE);
    expect(resolveAgentKind('codex', { family: 'openai', where })).toBe(CODEX);
    expect(() => resolveAgentKind('codex', { family: 'anthropic', where })).toThrow(/--provider openai/);
    expect(() => resolveAgentKind('claude-code', { family: undefined, where })).toThrow(/cassettes/);
  });

  it('refuses an unknown name with the list, and a known one that cannot run with why', () => {
    expect(() => resolveAgentKind('aider', { family: 'openai', where })).toThrow(ConfigError);
    try {
      resolveAgentKind('aider', { family: 'openai', where });
    } catch (error) {
      expect((error as ConfigError).problems.join()).toContain('claude-code');
    }
    expect(() => resolveAgentKind('gemini', { family: 'openai', where })).toThrow(/Gemini API/);
    expect(() => resolveAgentKind('opencode', { family: 'anthropic', where })).toThrow(/cannot run yet/);
  });

  it('the command kind needs agent.command, and speaks whichever API the provider does', () => {
    expect(() => resolveAgentKind('command', { family: 'openai', where })).toThrow(/agent.command/);
    const kind = resolveAgentKind('command', { family: 'openai', command: './agent.sh', where });
    expect(kind.runs === 'cli' && kind.family).toBe('openai');
  });
});

describe('launching a CLI agent', () => {
  const task = { model: 'm-1', baseUrl: 'http://127.0.0.1:4100', home: '/tmp/h', maxTurns: 7 };

  it('gives every CLI the loopback URL and the placeholder key, nothing of the host', () => {
    process.env.SANDBOX_HARNESS_UNIT_CANARY = 'host-canary-value';
    try {
      for (const kind of allAgentKinds()) {
        if (kind.runs !== 'cli') continue;
        const launch = kind.launch({ ...task, command: './agent' });
        const text = JSON.stringify(launch);
        expect(text).not.toContain('host-canary-value');
        for (const [name, value] of Object.entries(launch.env)) {
          if (/KEY/.test(name)) expect(value).toBe(PLACEHOLDER_KEY);
          if (/BASE_URL/.test(name)) expect(value.startsWith(task.baseUrl)).toBe(true);
        }
        // The task travels in a variable, never spliced into the command line.
        expect(launch.command).not.toContain('OPS-');
      }
    } finally {
      delete process.env.SANDBOX_HARNESS_UNIT_CANARY;
    }
  });

  it('starts the CLIs by their absolute path in the layer, never a name the image could shadow', () => {
    expect(CLAUDE_CODE.launch(task).command.startsWith(`${BUNDLE_DIR}/agents/claude-code/claude `)).toBe(
      true,
    );
    expect(CODEX.launch(task).command).toContain(` ${BUNDLE_DIR}/agents/codex/bin/codex exec `);
  });

  it("turns Claude Code's side traffic off and bounds its turns", () => {
    const launch = CLAUDE_CODE.launch(task);
    expect(launch.env.CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC).toBe('1');
    expect(launch.env.ANTHROPIC_SMALL_FAST_MODEL).toBe('m-1');
    expect(launch.command).toContain('--max-turns 7');
  });

  it("points Codex's one provider at the bridge, with hosted tools, websockets and updates off", () => {
    const config = codexConfig(task.baseUrl, 'm-1');
    expect(config).toContain('base_url = "http://127.0.0.1:4100/v1"');
    expect(config).toContain('web_search = "disabled"');
    expect(config).toContain('supports_websockets = false');
    expect(config).toContain('check_for_update_on_startup = false');
    expect(CODEX.launch(task).files).toEqual([{ path: '/tmp/h/.codex/config.toml', content: config }]);
  });
});

describe('the agent layer', () => {
  it('takes the relay Node and the CLI from the cached folders, root-owned programs under the bundle', () => {
    const dirs = new Map(layerPackages(CODEX).map((p) => [packageKey(p), `/cache/${p.name}`]));
    const layer = agentLayer(CODEX, dirs);
    expect(layer.owns).toEqual([BUNDLE_DIR]);
    expect(layer.files.map((f) => f.path)).toContain(`${BUNDLE_DIR}/node/bin/node`);
    expect(layer.files.map((f) => f.path)).toContain(`${BUNDLE_DIR}/agents/codex/bin/codex`);
    for (const file of layer.files) expect(file.mode).toBe(0o755);
    // Another version is another layer.
    const other = { ...CODEX, packages: [{ ...CODEX.packages[0]!, version: '9.9.9' }] };
    const otherDirs = new Map(layerPackages(other).map((p) => [packageKey(p), `/cache/${p.name}`]));
    expect(agentLayer(other, otherDirs).key).not.toBe(layer.key);
  });
});

describe('installing an agent package on the host', () => {
  const PKG: AgentPackage = {
    name: '@fake/agent-linux-x64',
    version: '1.2.3',
    shown: '@fake/agent@1.2.3',
    copy: [{ from: 'bin/agent', to: 'agents/fake/agent' }],
  };

  /** A fake `npm` on PATH that records its arguments and lays out the package (or a link). */
  async function fakeNpm(dir: string, layout: 'file' | 'link'): Promise<string> {
    const bin = join(dir, 'bin');
    await mkdir(bin, { recursive: true });
    const make =
      layout === 'file'
        ? 'mkdir -p "$d/bin" && echo agent > "$d/bin/agent"'
        : 'mkdir -p "$d/bin" && ln -s /etc/passwd "$d/bin/agent"';
    await writeFile(
      join(bin, 'npm'),
      `#!/bin/sh\nprintf '%s\\n' "$@" > "${dir}/args"\nwhile [ "$1" != --prefix ]; do shift; done\nd="$2/node_modules/@fake/agent-linux-x64"\n${make}\n`,
    );
    await chmod(join(bin, 'npm'), 0o755);
    return bin;
  }

  it('runs npm with install scripts off, for linux x64, and moves the whole package into the cache', async () => {
    const dir = await tempDir();
    const root = join(dir, 'cache');
    const path = process.env.PATH;
    process.env.PATH = `${await fakeNpm(dir, 'file')}:${path}`;
    try {
      expect((await agentReadiness({ ...CODEX, packages: [PKG] }, root)).missing).toContain(PKG.shown);
      const installed = await ensureInstalled(PKG, { root });
      expect(installed).toBe(packageDir(PKG, root));
      const args = (await readFile(join(dir, 'args'), 'utf8')).split('\n');
      expect(args).toContain('--ignore-scripts');
      expect(args).toContain('--os=linux');
      expect(args).toContain('--cpu=x64');
      expect(args).toContain('@fake/agent-linux-x64@1.2.3');
      expect(await readFile(join(installed, 'bin', 'agent'), 'utf8')).toBe('agent\n');
      // Installed once: a second call runs nothing.
      await rm(join(dir, 'args'));
      await ensureInstalled(PKG, { root });
      await expect(readFile(join(dir, 'args'))).rejects.toThrow();
    } finally {
      process.env.PATH = path;
    }
  });

  it('refuses a package whose file is a link, and leaves nothing in the cache', async () => {
    const dir = await tempDir();
    const root = join(dir, 'cache');
    const path = process.env.PATH;
    process.env.PATH = `${await fakeNpm(dir, 'link')}:${path}`;
    try {
      await expect(ensureInstalled(PKG, { root })).rejects.toThrow(/not a regular file/);
      await expect(readFile(join(packageDir(PKG, root), 'bin', 'agent'))).rejects.toThrow();
    } finally {
      process.env.PATH = path;
    }
  });

  it('a link planted where a cached file should be is not an installed package', async () => {
    const dir = await tempDir();
    const root = join(dir, 'cache');
    const pkgDir = packageDir(PKG, root);
    await mkdir(join(pkgDir, 'bin'), { recursive: true });
    await symlink('/etc/passwd', join(pkgDir, 'bin', 'agent'));
    expect((await agentReadiness({ ...CODEX, packages: [PKG] }, root)).missing).toContain(PKG.shown);
  });
});

describe('doctor on agents', () => {
  it('says builtin is ready, a CLI not yet installed is a note with how it gets installed, and why gemini cannot run', async () => {
    const { agentChecks } = await import('../../../src/agent-kinds/agent-doctor.js');
    const checks = await agentChecks(await tempDir());
    const byName = new Map(checks.map((c) => [c.name, c]));
    expect(byName.get('agent builtin')).toMatchObject({ ok: true, detail: 'ready (the built-in loop)' });
    expect(byName.get('agent codex')).toMatchObject({ ok: true, warning: true });
    expect(byName.get('agent codex')!.detail).toContain('@openai/codex@0.171.0');
    expect(byName.get('agent codex')!.fix).toContain('fix --agent codex');
    expect(byName.get('agent gemini')!.detail).toContain('Gemini API');
    // Notes, never problems: a missing agent does not fail the engine's doctor.
    expect(checks.every((c) => c.ok)).toBe(true);
  });
});
