/**
 * Refusals before a build that cannot work or would reach further than the catalog allows:
 * the default recipe without network and without what it installs, a pnpm/yarn/bun repo the
 * npm-only recipe would leave without dependencies, and the daemon's own downloads (`ADD
 * <url>`, a missing `FROM` image) in a build that has no network.
 */
import { BuildRefused } from '../../../errors.js';
import type { BuildContext } from '../../../image-context/build-context.js';
import { daemonFetches } from '../../../image-context/dockerfile.js';
import { imageRef } from '../../../object-names.js';
import { readRepoFile } from '../../../repo-files.js';
import type { DockerEngine } from '../engine/index.js';
import { BASE_IMAGES } from './base-images.js';

/**
 * The default recipe installs dependencies only when the repo did not bring them. Without
 * network that install cannot work, so say what to do before a build that must fail.
 */
export async function assertOfflineRecipeCanWork(
  repoDir: string,
  baseImage: string,
  context: BuildContext,
): Promise<void> {
  const has = (path: string) => context.snapshot.has(path);
  const lockfile = ['package-lock.json', 'npm-shrinkwrap.json'].find(has);
  const nodeModules = context.directories.includes('node_modules');
  const optIn = 'or let image builds use the network with `sandbox.build: { network: true }` in the catalog';
  if (lockfile && !nodeModules && (await lockfileInstalls(repoDir, lockfile))) {
    throw new BuildRefused(
      `the default sandbox recipe would run \`npm ci\` for ${repoDir} (it has ${lockfile} but no node_modules in the build context), and image builds have no network`,
      {
        hint: `Run \`npm ci\` in ${repoDir} on the host so node_modules is copied into the image (if it exists, .dockerignore or sandbox.build.exclude leaves it out), ${optIn}.`,
      },
    );
  }
  // Only the python base has pip; on any other the recipe skips requirements.txt.
  if (baseImage === BASE_IMAGES.python.tag && has('requirements.txt')) {
    throw new BuildRefused(
      `the default sandbox recipe would run \`pip install -r requirements.txt\` for ${repoDir}, and image builds have no network`,
      {
        hint: `When the tests need none of it (development tools only), leave it out of the image with \`sandbox.build: { exclude: [requirements.txt] }\` in the catalog; else write a Dockerfile.sandbox for the repo that brings the packages along (for example wheels in the repo and \`pip install --no-index --find-links\`), ${optIn}.`,
      },
    );
  }
}

/** Lockfiles of the package managers the default recipe never runs (the base has npm only). */
const OTHER_LOCKFILES: readonly (readonly [file: string, install: string])[] = [
  ['pnpm-lock.yaml', 'pnpm install'],
  ['yarn.lock', 'yarn install'],
  ['bun.lock', 'bun install'],
  ['bun.lockb', 'bun install'],
];

/**
 * The default recipe installs with npm, from package-lock.json only. A pnpm, yarn or bun repo
 * whose node_modules is not in the build context would get a sandbox without any of its
 * dependencies, and every test command would then fail as if the code were wrong.
 */
export async function assertDependenciesCanArrive(repoDir: string, context: BuildContext): Promise<void> {
  const has = (path: string) => context.snapshot.has(path);
  if (has('package-lock.json') || has('npm-shrinkwrap.json')) return;
  if (context.directories.includes('node_modules')) return;
  const other = OTHER_LOCKFILES.find(([file]) => has(file));
  if (!other || !(await declaresDependencies(repoDir))) return;
  const [file, install] = other;
  throw new BuildRefused(
    `${repoDir} has ${file} but no node_modules in the build context, and the default sandbox recipe installs only with npm (from package-lock.json): the sandbox would have none of package.json's dependencies`,
    {
      hint: `Run \`${install}\` in ${repoDir} on the host so node_modules is copied into the image (if it exists, .dockerignore or sandbox.build.exclude leaves it out), or write a Dockerfile.sandbox for the repo that brings them.`,
      details: { lockfile: file },
    },
  );
}

/**
 * The lockfile names a package to install (lockfile v2/v3: a `packages` key besides the root's
 * `""`; v1: a `dependencies` entry). `npm install` in a repo with no dependencies writes one that
 * names only the root, and `npm ci` then installs nothing: no network needed. Unreadable or not
 * JSON counts as yes, since the recipe's `npm ci` would then run (and fail offline).
 */
async function lockfileInstalls(repoDir: string, lockfile: string): Promise<boolean> {
  try {
    const text = await readRepoFile(repoDir, lockfile, lockfile, { optional: true });
    if (!text) return true;
    const lock: unknown = JSON.parse(text.toString('utf8'));
    if (typeof lock !== 'object' || lock === null) return true;
    const { packages, dependencies } = lock as Record<string, unknown>;
    const named = (value: unknown, except: string[] = []) =>
      typeof value === 'object' && value !== null && Object.keys(value).some((k) => !except.includes(k));
    return named(packages, ['']) || named(dependencies);
  } catch {
    return true;
  }
}

/** package.json names a dependency; unreadable or not JSON counts as no (nothing is refused on a guess). */
async function declaresDependencies(repoDir: string): Promise<boolean> {
  try {
    const text = await readRepoFile(repoDir, 'package.json', 'package.json', { optional: true });
    if (!text) return false;
    const manifest: unknown = JSON.parse(text.toString('utf8'));
    if (typeof manifest !== 'object' || manifest === null) return false;
    return ['dependencies', 'devDependencies', 'optionalDependencies'].some((key) => {
      const value: unknown = (manifest as Record<string, unknown>)[key];
      return typeof value === 'object' && value !== null && Object.keys(value).length > 0;
    });
  } catch {
    return false;
  }
}

/**
 * Network none only applies to the build steps' containers: the daemon itself downloads
 * `ADD <url>` sources and pulls missing `FROM` / `COPY --from` images over the host's
 * network. A build without network must need neither.
 */
export async function assertNothingToFetch(
  engine: DockerEngine,
  dockerfile: string,
  context: BuildContext,
  buildArgs: Record<string, string>,
): Promise<void> {
  const optIn = 'or let image builds use the network with `sandbox.build: { network: true }` in the catalog';
  for (const fetch of daemonFetches(context.dockerfileBytes.toString('utf8'), buildArgs)) {
    const where = `${dockerfile}:${fetch.line}: ${fetch.instruction}`;
    if (fetch.kind === 'add-url') {
      throw new BuildRefused(
        `${where}\n  ADD of ${fetch.ref} is downloaded by the Docker daemon over the host's network, and this build has no network`,
        { hint: `Bring the file with the repo and COPY it, ${optIn}.` },
      );
    }
    imageRef(fetch.ref, `${where}: its image`);
    if (!(await engine.images.inspect(fetch.ref))) {
      throw new BuildRefused(
        `${where}\n  the image ${fetch.ref} is not on this engine, so the daemon would pull it over the host's network, and this build has no network`,
        {
          hint: `Pull it first (\`docker pull ${fetch.ref}\`), build on the harness's base image (the BASE_IMAGE build argument), ${optIn}.`,
        },
      );
    }
  }
}
