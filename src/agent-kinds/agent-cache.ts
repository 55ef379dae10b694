/**
 * Agent packages installed on the host from the npm registry into the harness's cache, one
 * folder per package and version (`<cache>/agents/<name>@<version>`), so a CLI of several
 * hundred megabytes is downloaded once per host. `npm install --ignore-scripts`: nothing a
 * package says runs on the host; the files the layer takes are checked to be regular files
 * (never a link), and a folder appears in the cache only whole (staged, then renamed), under
 * a lock so two runs never install the same package at once.
 */
import { execFile } from 'node:child_process';
import { lstat, mkdir, mkdtemp, rename, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { ConfigError } from '../errors.js';
import { cacheDir } from '../image-context/cache-dir.js';
import { withFileLock } from '../image-context/build-lock.js';
import { packageKey, type AgentPackage } from './packages.js';

/** Where installed agent packages live: `$XDG_CACHE_HOME/sandbox-harness/agents` by default. */
export function agentCacheDir(): string {
  return join(cacheDir(), 'agents');
}

const safeName = (key: string) => key.replace(/[^A-Za-z0-9._@-]/g, '+');

/** The installed package's own folder in the cache (it may not be there yet). */
export function packageDir(pkg: AgentPackage, root: string = agentCacheDir()): string {
  return join(root, safeName(packageKey(pkg)), 'node_modules', pkg.name);
}

/** Why a file the layer needs is not usable in an installed package, or undefined. */
async function problemWith(dir: string, pkg: AgentPackage): Promise<string | undefined> {
  for (const { from } of pkg.copy) {
    const path = join(dir, from);
    const info = await lstat(path).catch(() => undefined);
    if (!info) return `${from} is missing`;
    if (!info.isFile()) return `${from} is not a regular file`;
  }
  return undefined;
}

/** Whether the package is installed whole in the cache. */
export async function isInstalled(pkg: AgentPackage, root: string = agentCacheDir()): Promise<boolean> {
  return (await problemWith(packageDir(pkg, root), pkg)) === undefined;
}

function npmInstall(prefix: string, pkg: AgentPackage, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    execFile(
      'npm',
      [
        'install',
        '--ignore-scripts',
        '--no-audit',
        '--no-fund',
        '--no-save',
        '--no-package-lock',
        '--loglevel=error',
        // The sandbox's platform, whatever the host's: these are its builds.
        '--os=linux',
        '--cpu=x64',
        '--prefix',
        prefix,
        packageKey(pkg),
      ],
      { maxBuffer: 4 * 1024 * 1024, timeout: 15 * 60_000, ...(signal ? { signal } : {}) },
      (error, _stdout, stderr) => {
        if (!error) return resolve();
        const said = String(stderr).trim().split('\n').slice(-6).join('\n');
        reject(
          new ConfigError(
            `installing ${pkg.shown} from the npm registry failed: ${said || error.message}`,
            [],
            { hint: 'Check that npm reaches its registry (`npm ping`), then try again.' },
          ),
        );
      },
    );
  });
}

/**
 * The package's folder in the cache, installed first when it is not there. `say` hears one
 * line when an install (or a wait for another process's) starts.
 */
export async function ensureInstalled(
  pkg: AgentPackage,
  options: { root?: string; say?: (line: string) => void; signal?: AbortSignal } = {},
): Promise<string> {
  const root = options.root ?? agentCacheDir();
  const dir = packageDir(pkg, root);
  if (await isInstalled(pkg, root)) return dir;
  const say = options.say ?? (() => undefined);
  await mkdir(root, { recursive: true });
  return withFileLock(
    `agent-${safeName(packageKey(pkg))}`,
    say,
    async () => {
      if (await isInstalled(pkg, root)) return dir;
      say(`installing ${pkg.shown} from the npm registry (once per host)`);
      const staging = await mkdtemp(join(root, '.install-'));
      try {
        await npmInstall(staging, pkg, options.signal);
        const problem = await problemWith(join(staging, 'node_modules', pkg.name), pkg);
        if (problem) {
          throw new ConfigError(`${pkg.shown} installed without what the agent layer needs: ${problem}`);
        }
        const final = join(root, safeName(packageKey(pkg)));
        await rm(final, { recursive: true, force: true });
        await rename(staging, final);
      } finally {
        await rm(staging, { recursive: true, force: true });
      }
      return dir;
    },
    {
      dir: join(root, '.locks'),
      staleMs: 60_000,
      waiting: `waiting for another process installing ${pkg.shown}`,
    },
  );
}
