/**
 * The image layer of an agent kind: its CLI's native build and the Node the model relay runs
 * on, copied from the packages installed on the host (`agent-cache.ts`) into
 * `/opt/sandbox-harness`, root-owned and read-only to the sandbox user. The folder is the
 * layer's alone (an image that brings its own is refused), and the agent is started by its
 * absolute path there, so a repo can neither choose nor replace the agent binary.
 */
import { join, posix } from 'node:path';
import type { ImageLayer, LayerFile } from '../image-context/image-layer.js';
import type { CliKind } from './agent-kind.js';
import { ensureInstalled, isInstalled } from './agent-cache.js';
import { BUNDLE_DIR, NODE_RUNTIME, packageKey, type AgentPackage } from './packages.js';

/** Bump when the layout of the bundle changes. */
const LAYOUT = 1;

/** What the layer of `kind` takes from the registry: the relay's Node, then the CLI's own. */
export function layerPackages(kind: CliKind): AgentPackage[] {
  return [NODE_RUNTIME, ...kind.packages];
}

/** The layer, from the packages' folders in the cache (`dirs`, by package key). */
export function agentLayer(kind: CliKind, dirs: ReadonlyMap<string, string>): ImageLayer {
  const files: LayerFile[] = [];
  for (const pkg of layerPackages(kind)) {
    const dir = dirs.get(packageKey(pkg));
    if (!dir) throw new Error(`no folder for ${packageKey(pkg)}`);
    for (const { from, to } of pkg.copy) {
      files.push({ path: posix.join(BUNDLE_DIR, to), source: { file: join(dir, from) }, mode: 0o755 });
    }
  }
  return {
    key: JSON.stringify([LAYOUT, kind.name, layerPackages(kind).map(packageKey)]),
    description: `agent ${kind.name}`,
    owns: [BUNDLE_DIR],
    files,
  };
}

/**
 * The layer of `kind`, its packages installed from the npm registry first where the cache
 * lacks them (install scripts never run). `say` hears what is being installed.
 */
export async function prepareAgentLayer(
  kind: CliKind,
  options: { root?: string; say?: (line: string) => void; signal?: AbortSignal } = {},
): Promise<ImageLayer> {
  const dirs = new Map<string, string>();
  for (const pkg of layerPackages(kind)) dirs.set(packageKey(pkg), await ensureInstalled(pkg, options));
  return agentLayer(kind, dirs);
}

/** Whether every package of `kind`'s layer is in the cache already (what `doctor` says). */
export async function agentReadiness(
  kind: CliKind,
  root?: string,
): Promise<{ ready: boolean; missing: string[] }> {
  const missing: string[] = [];
  for (const pkg of layerPackages(kind)) {
    if (!(await isInstalled(pkg, root))) missing.push(pkg.shown);
  }
  return { ready: missing.length === 0, missing };
}
