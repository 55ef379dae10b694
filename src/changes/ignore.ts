/**
 * What is not the agent's change: what tests, builds and git leave behind in a sandbox.
 * Such paths are dropped from the change set before the gate: never gated, never copied
 * back, never written into a verification; the run record lists them.
 *
 * The rules, in order (the first that decides wins):
 *  1. `.git` at the workspace root and everything below it: the harness's own repository
 *     of the pristine tree (what `git status` writes there is git's, not the agent's).
 *  2. A path that exists in the pristine tree is never ignored: a modification, deletion
 *     or type change of a file of the repo always counts (held-out tests included).
 *  3. A path the catalog's `editableFiles` names literally (no wildcard) is never ignored.
 *     A glob does not protect a path: `src/**` must not turn pytest's `src/__pycache__/`
 *     into a change (a binary one, refused).
 *  4. Ignored when a harness default (the ecosystems' caches, unless the catalog turns
 *     that default off), a catalog glob, or the repo's own pristine `.gitignore` files
 *     (unless the catalog turns them off) match the path or a folder above it.
 *
 * The `.gitignore` files are read once per image from the pristine tree, so a `.gitignore`
 * the agent writes or edits changes nothing (and is itself a change that is gated).
 */
import picomatch from 'picomatch';
import { posix } from 'node:path';
import type { EntryType, PathChange, WorkspaceTree } from '../sandbox/types.js';
import { pathProblem } from './allowlist.js';
import type { PristineSource } from './pristine.js';
import { sha256 } from './hash.js';
import { DEFAULT_IGNORED } from '../catalog/ignore-defaults.js';
import { GitignoreMatcher, loadGitignores, parseGitignoreLine, type LoadedGitignores } from './gitignore.js';

/** The catalog's `agent.ignoreChanges`, in either of its forms. */
export type IgnoreChangesSetting =
  | readonly string[]
  | {
      add?: readonly string[] | undefined;
      disable?: readonly string[] | undefined;
      gitignore?: boolean | undefined;
    };

export interface IgnoreSettings {
  /** More globs (picomatch, repo-relative). */
  add: readonly string[];
  /** Names of defaults turned off. */
  disable: readonly string[];
  /** Whether the repo's own `.gitignore` files count. */
  gitignore: boolean;
}

/** The old list form adds globs; the object form can also turn defaults off. */
export function ignoreSettings(setting: IgnoreChangesSetting | undefined): IgnoreSettings {
  if (setting === undefined) return { add: [], disable: [], gitignore: true };
  if (Array.isArray(setting))
    return { add: [...(setting as readonly string[])], disable: [], gitignore: true };
  const object = setting as Exclude<IgnoreChangesSetting, readonly string[]>;
  return {
    add: [...(object.add ?? [])],
    disable: [...(object.disable ?? [])],
    gitignore: object.gitignore ?? true,
  };
}

export type IgnoreReason = 'git' | 'default' | 'catalog' | 'gitignore' | 'tests';

export interface ChangeIgnore {
  /** Why a changed path is not the agent's change, or undefined when it is gated. */
  reason(path: string, type: EntryType | undefined): IgnoreReason | undefined;
}

export const NOTHING_IGNORED: ChangeIgnore = { reason: () => undefined };

function hasWildcard(glob: string): boolean {
  return picomatch.scan(glob).isGlob;
}

export interface ChangeIgnoreOptions {
  settings: IgnoreSettings;
  /** The repo's pristine `.gitignore` rules (`pristineGitignores`). */
  gitignore?: GitignoreMatcher;
  /** The catalog's `editableFiles`. */
  editable: readonly string[];
  /** The pristine tree: its paths are never ignored. */
  tree: WorkspaceTree;
}

export function createChangeIgnore(options: ChangeIgnoreOptions): ChangeIgnore {
  const { settings, tree } = options;
  const disabled = new Set(settings.disable);
  const defaults = new GitignoreMatcher(
    new Map([
      [
        '',
        DEFAULT_IGNORED.filter((d) => !disabled.has(d.name)).flatMap((d) =>
          d.patterns.map((p) => parseGitignoreLine(p)!),
        ),
      ],
    ]),
  );
  const added = settings.add.length > 0 ? picomatch([...settings.add], { dot: true }) : undefined;
  const literal = new Set(options.editable.filter((g) => !hasWildcard(g)));
  const gitignore = settings.gitignore ? options.gitignore : undefined;
  return {
    reason(path, type) {
      // A malformed path is never silently dropped: it must reach the gate and be refused.
      if (pathProblem(path) !== undefined) return undefined;
      if (path === '.git' || path.startsWith('.git/')) return 'git';
      if (tree.has(path) || literal.has(path)) return undefined;
      const isDir = type === 'directory';
      if (defaults.ignores(path, isDir)) return 'default';
      if (added?.(path)) return 'catalog';
      if (gitignore?.ignores(path, isDir)) return 'gitignore';
      return undefined;
    },
  };
}

/**
 * What the test command itself wrote into the workspace of the untouched repo (the baseline's
 * sandbox, scanned after its run): the new paths, a new folder standing for everything below
 * it. Tests that leave their output in the repo (`test/output/`, a report, a fixture they
 * generate) without a `.gitignore` rule for it would otherwise make every attempt that runs
 * them "change" a file it may not.
 */
export interface TestOutputs {
  paths: ReadonlySet<string>;
  folders: ReadonlySet<string>;
}

export const NO_TEST_OUTPUTS: TestOutputs = { paths: new Set(), folders: new Set() };

export function testOutputsOf(changes: readonly PathChange[]): TestOutputs {
  const paths = new Set<string>();
  const folders = new Set<string>();
  for (const change of changes) {
    if (change.kind !== 'added' || change.unreadable || pathProblem(change.path) !== undefined) continue;
    paths.add(change.path);
    if (change.type === 'directory') folders.add(change.path);
  }
  return { paths, folders };
}

/**
 * `ignore`, plus what the tests wrote on the untouched repo. Only a path the change would be
 * refused for is left aside that way: an editable path always counts (the agent may well
 * write a file the tests also write), and so does every path of the pristine tree. Leaving a
 * path aside only ever keeps it from being copied back.
 */
export function withTestOutputs(
  ignore: ChangeIgnore,
  outputs: TestOutputs,
  options: { tree: WorkspaceTree; isEditable: (path: string) => boolean },
): ChangeIgnore {
  if (outputs.paths.size === 0) return ignore;
  const written = (path: string): boolean => {
    if (outputs.paths.has(path)) return true;
    for (let cut = path.lastIndexOf('/'); cut > 0; cut = path.lastIndexOf('/', cut - 1)) {
      if (outputs.folders.has(path.slice(0, cut))) return true;
    }
    return false;
  };
  return {
    reason(path, type) {
      const own = ignore.reason(path, type);
      if (own !== undefined) return own;
      if (pathProblem(path) !== undefined || options.tree.has(path)) return undefined;
      if (options.isEditable(path)) return undefined;
      return written(path) ? 'tests' : undefined;
    },
  };
}

const loaded = new WeakMap<WorkspaceTree, Promise<LoadedGitignores>>();

/**
 * The repo's `.gitignore` rules as the pristine tree has them: the files the tree lists,
 * read from `pristine` and used only when their bytes hash to the tree's sha256 (so a host
 * file edited since the image was built does not count). Once per tree.
 */
export function pristineGitignores(tree: WorkspaceTree, pristine: PristineSource): Promise<LoadedGitignores> {
  let pending = loaded.get(tree);
  if (!pending) {
    const paths = [...tree.entries()]
      .filter(([path, entry]) => entry.type === 'file' && posix.basename(path) === '.gitignore')
      .map(([path]) => path);
    pending = loadGitignores(paths, async (path) => {
      const want = tree.get(path)?.sha256;
      const file = await pristine.read(path).catch(() => undefined);
      return file && want !== undefined && sha256(file.content) === want ? file.content : undefined;
    });
    loaded.set(tree, pending);
  }
  return pending;
}

/**
 * `.git/info/exclude` lines for the sandbox's repository: the defaults in force and the
 * dependency folders, so `git status` there lists what the gate looks at (the repo's own
 * `.gitignore` files apply by themselves; catalog globs are picomatch, not git's syntax).
 */
export function gitExcludes(settings: IgnoreSettings): string[] {
  const disabled = new Set(settings.disable);
  return [
    '/node_modules/',
    ...DEFAULT_IGNORED.filter((d) => !disabled.has(d.name)).flatMap((d) => d.patterns),
  ];
}
