/**
 * Why Python tests cannot import a module, said before a model call is spent on it. A test
 * module that fails with `ModuleNotFoundError` is a failing test (it may be what the ticket is
 * about), so the verdict stays `failing`; but two shapes of it no agent can fix from the
 * editable files, and a newcomer meets both on the first repo:
 *  - the package lives under a folder such as `src/` (a "src layout" that the project's own
 *    workflow makes importable with `pip install -e .`, which the sandbox never runs), so
 *    the catalog must put that folder on `PYTHONPATH`;
 *  - the module is neither in the repo (its root or a package folder) nor in the image
 *    (a dependency the Python base does not bring, or a standard module that this Python no
 *    longer has);
 *  - and, alike, `async def` tests that pytest skips without an async plugin.
 *
 * Pure over the test output, a lookup of repo paths and the sandbox's environment.
 */
import { lstat } from 'node:fs/promises';
import { join } from 'node:path';

export type RepoPathType = 'file' | 'directory';

/** What a repo-relative path is, without following links; undefined when absent (or a link). */
export type RepoPathLookup = (path: string) => Promise<RepoPathType | undefined>;

/** Folders a package is commonly kept under instead of the repo's root. */
const PACKAGE_FOLDERS = ['src', 'lib', 'python'] as const;

/** At most this many modules are looked at: the first ones are the ones that matter. */
const MAX_MODULES = 3;

/** Top-level names in `No module named 'x'` / `'x.y'` lines, first seen first. */
export function missingModules(output: string): string[] {
  const names = new Set<string>();
  for (const match of output.matchAll(/\bModuleNotFoundError: No module named '([^'\n]+)'/g)) {
    const top = (match[1] ?? '').split('.')[0] ?? '';
    if (/^[A-Za-z_][A-Za-z0-9_]*$/.test(top)) names.add(top);
    if (names.size >= MAX_MODULES) break;
  }
  return [...names];
}

async function moduleAt(lookup: RepoPathLookup, folder: string, name: string): Promise<string | undefined> {
  const prefix = folder === '' ? '' : `${folder}/`;
  if ((await lookup(`${prefix}${name}`)) === 'directory') return `${prefix}${name}/`;
  if ((await lookup(`${prefix}${name}.py`)) === 'file') return `${prefix}${name}.py`;
  return undefined;
}

function onPythonPath(env: Readonly<Record<string, string>>, folder: string): boolean {
  return (env.PYTHONPATH ?? '')
    .split(':')
    .map((p) =>
      p
        .replace(/^\.\//, '')
        .replace(/\/+$/, '')
        .replace(/^\/workspace\//, ''),
    )
    .includes(folder);
}

/**
 * One sentence per module the tests could not import that the agent cannot make importable:
 * one under a package folder that is not on `PYTHONPATH`, or one found nowhere in the repo.
 */
export async function importHints(
  output: string,
  lookup: RepoPathLookup,
  env: Readonly<Record<string, string>> = {},
): Promise<string[]> {
  const hints: string[] = [];
  for (const name of missingModules(output)) {
    // In the repo's root it is importable from /workspace: the error is something else.
    if (await moduleAt(lookup, '', name)) continue;
    let found = false;
    for (const folder of PACKAGE_FOLDERS) {
      const at = await moduleAt(lookup, folder, name);
      if (!at) continue;
      found = true;
      if (onPythonPath(env, folder)) break;
      hints.push(
        `the tests cannot import \`${name}\`, which is ${at} in the repo: the sandbox does not install the project (no \`pip install -e .\`), so put the folder on the path with \`sandbox: { env: { PYTHONPATH: ${folder} } }\` in the catalog (or pytest's \`pythonpath = ["${folder}"]\`)`,
      );
      break;
    }
    if (!found)
      hints.push(
        `the tests cannot import \`${name}\`, which is neither at the repo's root, nor under ${PACKAGE_FOLDERS.map((f) => `${f}/`).join(', ')}, nor installed in the sandbox (the Python base brings pytest and the standard library): install it with the repo's \`Dockerfile.sandbox\` or \`sandbox.build.network: true\` and a requirements.txt, or leave the tests that need it out of the test command (pytest's \`--ignore=<file>\`), unless adding it is the ticket`,
      );
  }
  return hints;
}

/**
 * pytest without an async plugin skips (pytest 8.3) or fails (8.4+) every `async def` test:
 * the ticket's may be one of them, and a run that skips it "passes".
 */
export function asyncPluginHint(output: string): string | undefined {
  if (!/\basync def functions are not natively supported\b/.test(output)) return undefined;
  return "pytest did not run the `async def` tests: no async plugin (pytest-asyncio, anyio, pytest-trio) is installed in the sandbox (the Python base brings pytest only), so they are skipped or fail whatever the code does; install one with the repo's `Dockerfile.sandbox` or `sandbox.build.network: true` and a requirements.txt";
}

/** Every hint for one test run: the async one whatever the verdict, the import ones when the tests did not pass. */
export async function testRunHints(
  output: string,
  passed: boolean,
  lookup: RepoPathLookup,
  env: Readonly<Record<string, string>> = {},
): Promise<string[]> {
  const asyncHint = asyncPluginHint(output);
  return [...(asyncHint ? [asyncHint] : []), ...(passed ? [] : await importHints(output, lookup, env))];
}

/** A lookup of the repo on the host: `lstat` each step, so no link is followed (a link reads as absent). */
export function hostRepoLookup(repoDir: string): RepoPathLookup {
  return async (path) => {
    let at = repoDir;
    let type: RepoPathType | undefined;
    for (const part of path.split('/')) {
      if (part === '' || part === '.' || part === '..') return undefined;
      at = join(at, part);
      const st = await lstat(at).catch(() => undefined);
      if (!st || st.isSymbolicLink()) return undefined;
      type = st.isDirectory() ? 'directory' : st.isFile() ? 'file' : undefined;
      if (!type) return undefined;
    }
    return type;
  };
}
