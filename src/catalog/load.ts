/**
 * Reading a catalog from disk: validation, the repo it points at, and the read-only copy
 * that sandboxes see. Nothing is created before the whole catalog is known to be good.
 */
import { createHash } from 'node:crypto';
import { readFile, realpath, stat } from 'node:fs/promises';
import path from 'node:path';
import { ConfigError } from '../errors.js';
import type { InjectedFile, SandboxResources } from '../sandbox/types.js';
import { catalogSchema, type Catalog } from './schema.js';
import { memoryBytes } from './sandbox-schema.js';
import { problemsError, validateYaml, type ValidationProblem } from '../yaml-validate.js';

/** Where every sandbox finds the catalog, root-owned and read-only so the agent cannot edit the rules. */
export const CATALOG_SANDBOX_PATH = '/etc/sandbox-harness/catalog.json';
/** Commands in the sandbox find the catalog through this variable (its value is the path). */
export const CATALOG_ENV_VAR = 'SERVICE_CATALOG';

export interface LoadedCatalog {
  catalog: Catalog;
  /** Absolute path of the catalog file. */
  file: string;
  /** Folder of the catalog file. */
  dir: string;
  /** Absolute path of the service repo (`repo` resolved against `dir`). */
  repoDir: string;
  /** The file's text as read. */
  text: string;
  /** sha256 (hex) of the file's bytes, for run records and cache keys. */
  hash: string;
  /** The name used in messages (relative to the working directory when that is shorter). */
  displayPath: string;
}

export interface LoadCatalogOptions {
  /** Base for relative `file` and for the display path; default `process.cwd()`. */
  cwd?: string;
  displayPath?: string;
}

export async function loadCatalog(file: string, options: LoadCatalogOptions = {}): Promise<LoadedCatalog> {
  const cwd = options.cwd ?? process.cwd();
  const absolute = path.resolve(cwd, file);
  const displayPath = options.displayPath ?? displayName(cwd, absolute);

  let bytes: Buffer;
  try {
    bytes = await readFile(absolute);
  } catch (error) {
    throw readError(displayPath, absolute, error);
  }
  const hash = createHash('sha256').update(bytes).digest('hex');
  const text = bytes.toString('utf8').replace(/^\uFEFF/, '');
  const dir = path.dirname(absolute);

  const result = validateYaml(absolute, text, catalogSchema, { displayPath });
  const problems: ValidationProblem[] = result.ok ? [] : [...result.problems];

  // The repo is checked even when other fields are wrong so that every problem shows at once.
  const data = result.ok ? result.value : result.parsed.data;
  const repo = isRecord(data) && typeof data.repo === 'string' && data.repo !== '' ? data.repo : undefined;
  const repoDir = repo === undefined ? undefined : path.resolve(dir, repo);
  if (repo !== undefined && repoDir !== undefined) {
    const repoProblem = await directoryProblem(repoDir);
    if (repoProblem) {
      problems.push({
        file: displayPath,
        ...result.parsed.locate(['repo']),
        path: 'repo',
        message: `${repoProblem}: ${JSON.stringify(repo)} resolves to ${repoDir} (relative to the catalog file's folder)`,
      });
    }
  }

  if (!result.ok || problems.length > 0 || repoDir === undefined) {
    problems.sort((a, b) => a.line - b.line || a.column - b.column);
    throw problemsError(displayPath, problems);
  }
  return { catalog: result.value, file: absolute, dir, repoDir, text, hash, displayPath };
}

/**
 * The catalog as sandboxes see it: the validated catalog with defaults filled in, without
 * the host path of the repo (meaningless inside, and host layout is none of its business).
 */
export function catalogForSandbox(loaded: Pick<LoadedCatalog, 'catalog'>): string {
  const { repo: _repo, ...visible } = loaded.catalog;
  return `${JSON.stringify(visible, null, 2)}\n`;
}

/** The catalog as a root-owned, read-only file for `SandboxSpec.files`. */
export function catalogSandboxFile(loaded: Pick<LoadedCatalog, 'catalog'>): InjectedFile {
  return { path: CATALOG_SANDBOX_PATH, content: catalogForSandbox(loaded) };
}

/** The variables every sandbox gets so commands can find the catalog. */
export function catalogSandboxEnv(): Record<string, string> {
  return { [CATALOG_ENV_VAR]: CATALOG_SANDBOX_PATH };
}

/** Sandbox resource limits from the catalog; unset fields are left to the backend's defaults. */
export function resourcesFromCatalog(catalog: Pick<Catalog, 'sandbox'>): SandboxResources {
  const resources = catalog.sandbox.resources;
  const out: SandboxResources = {};
  if (resources?.memory !== undefined) out.memoryBytes = memoryBytes(resources.memory);
  if (resources?.cpus !== undefined) out.cpus = resources.cpus;
  if (resources?.pids !== undefined) out.pids = resources.pids;
  if (resources?.diskBytes !== undefined) out.diskBytes = memoryBytes(resources.diskBytes);
  return out;
}

/**
 * Repo-relative paths under which the catalog file itself lives in the repo (none when it is
 * outside), so the allowlist can refuse them: an agent that may edit the catalog may edit
 * its own rules. Both the literal and the symlink-resolved locations are returned.
 */
export async function catalogPathsInRepo(loaded: Pick<LoadedCatalog, 'file' | 'repoDir'>): Promise<string[]> {
  const candidates: [string, string][] = [[loaded.repoDir, loaded.file]];
  try {
    candidates.push([await realpath(loaded.repoDir), await realpath(loaded.file)]);
  } catch {
    // Gone or unreadable since loading: the literal location is all we can say.
  }
  const out = new Set<string>();
  for (const [repoDir, file] of candidates) {
    const relative = path.relative(repoDir, file);
    if (relative !== '' && !relative.startsWith('..') && !path.isAbsolute(relative)) {
      out.add(relative.split(path.sep).join('/'));
    }
  }
  return [...out];
}

function displayName(cwd: string, absolute: string): string {
  const relative = path.relative(cwd, absolute);
  return relative === '' || relative.startsWith('..') || path.isAbsolute(relative) ? absolute : relative;
}

function readError(displayPath: string, absolute: string, error: unknown): ConfigError {
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  if (code === 'ENOENT') {
    return new ConfigError(`catalog file not found: ${displayPath} (looked at ${absolute})`, [], {
      hint: 'pass the path of a catalog/<service>.yaml file',
      cause: error,
    });
  }
  if (code === 'EISDIR') {
    return new ConfigError(`catalog path is a folder, not a file: ${displayPath}`, [], {
      hint: 'pass the path of a catalog/<service>.yaml file',
      cause: error,
    });
  }
  return new ConfigError(`cannot read catalog file ${displayPath}: ${(error as Error).message}`, [], {
    cause: error,
  });
}

async function directoryProblem(dir: string): Promise<string | undefined> {
  try {
    const info = await stat(dir);
    return info.isDirectory() ? undefined : 'the repo path is not a folder';
  } catch {
    return 'the repo folder does not exist';
  }
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
