/**
 * Harbor task folders as an eval source (Terminal-Bench 2 and the adapters that load them):
 * `instruction.md` (the ticket), `task.toml` (timeouts, resources, network per phase),
 * `environment/Dockerfile`, `tests/test.sh` (writes /logs/verifier/reward.txt or reward.json)
 * and optionally `solution/solve.sh` (the oracle). This file finds the folders and reads them
 * as hostile input: bounded reads that never follow a link, `task.toml` parsed with smol-toml
 * and validated with zod, every problem at file:line with the field, what was expected and
 * what was there. Turning a task into a suite task is `harbor-materialize.ts`.
 */
import { constants } from 'node:fs';
import { lstat, open, readdir } from 'node:fs/promises';
import path from 'node:path';
import { parse as parseToml, TomlError } from 'smol-toml';
import { z } from 'zod';
import { ConfigError } from '../../errors.js';
import {
  loadHarborSteps,
  MULTI_STEP_STRATEGIES,
  stepsTomlSchema,
  stepTomlSchema,
  type HarborStep,
} from './harbor-steps.js';

export const HARBOR_LIMITS = {
  tomlBytes: 256 * 1024,
  instructionBytes: 1024 * 1024,
  dockerfileBytes: 1024 * 1024,
  tomlDepth: 8,
  tasks: 1000,
} as const;

const seconds = z
  .number({ error: 'expected a number of seconds greater than 0' })
  .positive({ error: 'expected a number of seconds greater than 0' })
  .max(7 * 24 * 3600, { error: 'expected at most a week of seconds' });

const NETWORK_MODES = ['public', 'no-network', 'allowlist'] as const;
const networkMode = z.enum(NETWORK_MODES, { error: 'expected "public", "no-network" or "allowlist"' });
const allowedHosts = z
  .array(z.string({ error: 'expected a host name' }).min(1, { error: 'expected a host name' }).max(253), {
    error: 'expected a list of host names',
  })
  .max(100, { error: 'expected at most 100 host names' });

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,127}$/;
const envMap = z
  .record(
    z.string().regex(ENV_NAME, { error: 'expected a variable name of letters, digits and "_"' }),
    z
      .string({ error: 'expected a string value' })
      .max(4096, { error: 'expected at most 4096 characters' })
      .refine((v) => !v.includes('${'), {
        error: 'a ${VAR} template would copy a host variable into the sandbox, which never happens here',
      }),
    { error: 'expected a table of NAME = "value"' },
  )
  .refine((env) => Object.keys(env).length <= 100, { error: 'expected at most 100 variables' });

const user = z.union([z.string().min(1), z.int().nonnegative()], {
  error: 'expected a user name or uid',
});

const unsupported = (what: string) => z.never({ error: `${what} is not supported by sandbox-harness` });

const phase = {
  timeout_sec: seconds.optional(),
  user: user.optional(),
  network_mode: networkMode.optional(),
  allowed_hosts: allowedHosts.optional(),
};

export const taskTomlSchema = z.strictObject({
  schema_version: z.string({ error: 'expected a version string such as "1.0"' }).optional(),
  version: z.string({ error: 'expected a version string such as "1.0"' }).optional(),
  task: z
    .looseObject(
      { name: z.string({ error: 'expected a name such as "org/task"' }).max(200).optional() },
      { error: 'expected a table' },
    )
    .optional(),
  metadata: z.record(z.string(), z.unknown(), { error: 'expected a table' }).optional(),
  source: z.string({ error: 'expected a string' }).optional(),
  agent: z.strictObject(phase, { error: 'expected a table' }).optional(),
  verifier: z.strictObject({ ...phase, env: envMap.optional() }, { error: 'expected a table' }).optional(),
  environment: z
    .strictObject(
      {
        build_timeout_sec: seconds.optional(),
        docker_image: z
          .string({ error: 'expected an image reference' })
          .regex(/^[A-Za-z0-9][A-Za-z0-9._/:@-]{0,254}$/, { error: 'expected an image reference' })
          .optional(),
        cpus: z
          .number({ error: 'expected a number of CPUs greater than 0' })
          .positive({ error: 'expected a number of CPUs greater than 0' })
          .max(256, { error: 'expected at most 256 CPUs' })
          .optional(),
        memory_mb: z
          .int({ error: 'expected a whole number of MB greater than 0' })
          .positive({ error: 'expected a whole number of MB greater than 0' })
          .max(1024 * 1024, { error: 'expected at most 1048576 MB' })
          .optional(),
        storage_mb: z
          .int({ error: 'expected a whole number of MB greater than 0' })
          .positive({ error: 'expected a whole number of MB greater than 0' })
          .max(16 * 1024 * 1024, { error: 'expected at most 16777216 MB' })
          .optional(),
        // Deprecated spellings Harbor still reads ("2G", "512M").
        memory: z
          .string()
          .regex(/^\d+(\.\d+)?[KMG]$/i, { error: 'expected a size such as "2G" or "512M"' })
          .optional(),
        storage: z
          .string()
          .regex(/^\d+(\.\d+)?[KMG]$/i, { error: 'expected a size such as "10G"' })
          .optional(),
        gpus: z
          .int({ error: 'expected a whole number of GPUs' })
          .max(0, { error: 'GPUs are not available to sandboxes here; expected 0' })
          .optional(),
        gpu_types: z.array(z.string()).nullable().optional(),
        allow_internet: z.boolean({ error: 'expected true or false' }).optional(),
        network_mode: networkMode.optional(),
        allowed_hosts: allowedHosts.optional(),
        env: envMap.optional(),
        mcp_servers: z
          .array(z.unknown())
          .max(0, { error: 'MCP servers are not supported by sandbox-harness' })
          .optional(),
        healthcheck: unsupported('[environment.healthcheck]').optional(),
        skills_dir: unsupported('environment.skills_dir').optional(),
      },
      { error: 'expected a table' },
    )
    .optional(),
  solution: z.strictObject({ env: envMap.optional() }, { error: 'expected a table' }).optional(),
  multi_step_reward_strategy: z
    .enum(MULTI_STEP_STRATEGIES, { error: 'expected "mean" or "final"' })
    .optional(),
  steps: stepsTomlSchema(stepTomlSchema({ seconds, envMap })).optional(),
});

export type TaskToml = z.output<typeof taskTomlSchema>;

export interface HarborTask {
  /** From the folder's name: letters, digits, ".", "_", "-". */
  id: string;
  /** Absolute path of the task folder. */
  dir: string;
  /** As shown in messages (relative to the working directory when it can be). */
  display: string;
  config: TaskToml;
  /** The task's instruction; with steps, never sent to the agent (each step's is), and maybe empty. */
  instruction: string;
  /** With `[[steps]]`: each step's folder, read, in order. */
  steps?: HarborStep[];
  /** The environment's Dockerfile text; absent when only `docker_image` is given. */
  dockerfile?: string;
  /** Absolute. */
  environmentDir?: string;
  testsDir: string;
  /** Absolute; absent when the task has no `solution/solve.sh`. */
  solutionDir?: string;
}

const TASK_ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

/** Whether `dir` is a task folder (holds task.toml) or a folder of them; undefined for neither. */
export async function harborTaskDirs(dir: string): Promise<string[] | undefined> {
  const top = await lstat(dir).catch(() => undefined);
  if (!top?.isDirectory()) return undefined;
  if (await isRegularFile(path.join(dir, 'task.toml'))) return [dir];
  const found: string[] = [];
  for (const entry of (await readdir(dir, { withFileTypes: true })).sort((a, b) =>
    a.name < b.name ? -1 : 1,
  )) {
    if (!entry.isDirectory()) continue;
    if (await isRegularFile(path.join(dir, entry.name, 'task.toml'))) found.push(path.join(dir, entry.name));
    if (found.length > HARBOR_LIMITS.tasks)
      throw new ConfigError(`${dir}: more than ${HARBOR_LIMITS.tasks} Harbor task folders`);
  }
  return found.length > 0 ? found : undefined;
}

async function isRegularFile(file: string): Promise<boolean> {
  return (await lstat(file).catch(() => undefined))?.isFile() === true;
}

/** Reads and validates every task folder; throws one ConfigError listing every problem of every task. */
export async function loadHarborTasks(dirs: readonly string[], cwd: string): Promise<HarborTask[]> {
  const problems: string[] = [];
  const tasks: HarborTask[] = [];
  const seen = new Map<string, string>();
  for (const dir of dirs) {
    const display = path.relative(cwd, dir) || '.';
    const loaded = await loadHarborTask(dir, display);
    if ('problems' in loaded) {
      problems.push(...loaded.problems);
      continue;
    }
    const first = seen.get(loaded.id);
    if (first) {
      problems.push(`${display}: task id ${JSON.stringify(loaded.id)} is used twice (also ${first})`);
      continue;
    }
    seen.set(loaded.id, display);
    tasks.push(loaded);
  }
  if (problems.length > 0)
    throw new ConfigError(
      [
        `Harbor task folders are not valid (${problems.length} problem(s)):`,
        ...problems.map((p) => `  ${p}`),
      ].join('\n'),
      problems,
    );
  return tasks;
}

export async function loadHarborTask(
  dir: string,
  display: string,
): Promise<HarborTask | { problems: string[] }> {
  const problems: string[] = [];
  const at = (name: string) => path.join(display, name);
  const id = path.basename(dir);
  if (!TASK_ID.test(id))
    problems.push(
      `${display}: the folder name ${JSON.stringify(id)} is the task id: expected letters, digits, ".", "_" or "-" (at most 128)`,
    );

  const toml = await readTaskFile(dir, 'task.toml', HARBOR_LIMITS.tomlBytes);
  let config: TaskToml | undefined;
  if (typeof toml !== 'string') problems.push(`${at('task.toml')}: ${toml.problem}`);
  else {
    const parsed = parseTaskToml(toml, at('task.toml'));
    if ('problems' in parsed) problems.push(...parsed.problems);
    else config = parsed.config;
  }

  // A multi-step task's instruction.md is optional: each step has its own.
  const multiStep = config?.steps !== undefined;
  const read = await readTaskFile(dir, 'instruction.md', HARBOR_LIMITS.instructionBytes);
  const instruction = multiStep && typeof read !== 'string' && read.problem === 'missing' ? '' : read;
  if (typeof instruction !== 'string') problems.push(`${at('instruction.md')}: ${instruction.problem}`);
  else if (instruction.trim() === '' && !multiStep)
    problems.push(`${at('instruction.md')}: the instruction is empty`);

  const environmentDir = path.join(dir, 'environment');
  const envKind = await folderKind(environmentDir);
  let dockerfile: string | undefined;
  if (envKind === 'folder') {
    if (await exists(path.join(environmentDir, 'docker-compose.yaml')))
      problems.push(
        `${at('environment/docker-compose.yaml')}: multi-container environments are not supported by sandbox-harness (one sandbox per phase)`,
      );
    const text = await readTaskFile(dir, 'environment/Dockerfile', HARBOR_LIMITS.dockerfileBytes);
    if (typeof text === 'string') dockerfile = text;
    else if (!config?.environment?.docker_image || text.problem !== 'missing')
      problems.push(`${at('environment/Dockerfile')}: ${text.problem}`);
  } else if (envKind === 'link') problems.push(`${at('environment')}: a symlink; refused`);
  else if (!config?.environment?.docker_image)
    problems.push(
      `${at('environment')}: missing (expected environment/Dockerfile, or environment.docker_image in task.toml)`,
    );

  const testsDir = path.join(dir, 'tests');
  const testKind = await folderKind(testsDir);
  let taskTestSh = false;
  // A multi-step task's tests/ is optional: shared helpers, and a test.sh for steps without one.
  if (testKind !== 'folder' && !(multiStep && testKind === 'missing'))
    problems.push(
      `${at('tests')}: ${testKind === 'link' ? 'a symlink; refused' : 'missing (expected tests/test.sh)'}`,
    );
  else if (testKind === 'folder') {
    const testSh = await readTaskFile(dir, 'tests/test.sh', HARBOR_LIMITS.instructionBytes);
    taskTestSh = typeof testSh === 'string';
    if (typeof testSh !== 'string' && !(multiStep && testSh.problem === 'missing'))
      problems.push(`${at('tests/test.sh')}: ${testSh.problem}`);
  }
  let steps: HarborStep[] | undefined;
  if (config?.steps) {
    const names = config.steps.map((s) => s.name);
    const loaded = await loadHarborSteps(
      dir,
      display,
      names,
      taskTestSh,
      readTaskFile,
      HARBOR_LIMITS.instructionBytes,
    );
    if ('problems' in loaded) problems.push(...loaded.problems);
    else steps = loaded.steps;
  }
  const solutionDir = path.join(dir, 'solution');
  const hasSolution =
    (await folderKind(solutionDir)) === 'folder' && (await isRegularFile(path.join(solutionDir, 'solve.sh')));

  if (problems.length > 0 || !config || typeof instruction !== 'string') return { problems };
  return {
    id,
    dir,
    display,
    config,
    instruction,
    ...(dockerfile !== undefined
      ? { dockerfile, environmentDir }
      : envKind === 'folder'
        ? { environmentDir }
        : {}),
    testsDir,
    ...(hasSolution ? { solutionDir } : {}),
    ...(steps ? { steps } : {}),
  };
}

/** task.toml text to its validated config, or every problem at file:line. */
export function parseTaskToml(text: string, file: string): { config: TaskToml } | { problems: string[] } {
  let data: unknown;
  try {
    data = parseToml(text, { maxDepth: HARBOR_LIMITS.tomlDepth });
  } catch (error) {
    if (error instanceof TomlError) {
      const first = error.message.split('\n')[0] ?? error.message;
      return {
        problems: [
          `${file}:${error.line}:${error.column}: not valid TOML: ${first.replace(/^Invalid TOML document: /, '')}`,
        ],
      };
    }
    return {
      problems: [`${file}: not valid TOML: ${error instanceof Error ? error.message : String(error)}`],
    };
  }
  const result = taskTomlSchema.safeParse(data);
  if (result.success) return { config: result.data };
  return {
    problems: result.error.issues.map((issue) => {
      const keys = issue.code === 'unrecognized_keys' ? issue.keys : [];
      const where = [...issue.path.map(String), ...(keys.length === 1 ? keys : [])];
      const field = where.join('.') || '(file)';
      const line = locateToml(text, where);
      const message =
        issue.code === 'unrecognized_keys'
          ? `unknown key${keys.length > 1 ? 's' : ''} ${keys.map((k) => JSON.stringify(k)).join(', ')} (Harbor's task.toml has no such field, or sandbox-harness cannot honour it)`
          : `${issue.message}, got ${describe(valueAt(data, issue.path))}`;
      return `${file}:${line}: ${field}: ${message}`;
    }),
  };
}

function valueAt(data: unknown, keys: readonly PropertyKey[]): unknown {
  let value = data;
  for (const key of keys) {
    if (typeof value !== 'object' || value === null) return undefined;
    value = (value as Record<PropertyKey, unknown>)[key];
  }
  return value;
}

function describe(value: unknown): string {
  if (value === undefined) return 'nothing';
  if (value instanceof Date) return 'a date';
  if (Array.isArray(value)) return `a list of ${value.length}`;
  if (typeof value === 'object' && value !== null) return 'a table';
  const text = JSON.stringify(value) ?? String(value);
  return text.length > 60 ? `${text.slice(0, 59)}…` : text;
}

/**
 * The line of `keys` in TOML text: the `[section]` header (or `[[section]]`), then the
 * `key =` line inside it. smol-toml keeps no positions, and task.toml files are plain enough
 * for this; the section's line (or line 1) when the key is written some other way.
 */
export function locateToml(text: string, keys: readonly string[]): number {
  const lines = text.split('\n');
  const header = (line: string) =>
    /^\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(#.*)?$/.exec(line)?.[1]?.replace(/\s*\.\s*/g, '.');
  let section = '';
  let best = 1;
  let bestDepth = -1;
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    const h = header(line);
    if (h !== undefined) {
      section = h;
      const parts = h.split('.');
      const depth = parts.length;
      if (keys.slice(0, depth).join('.') === h && depth > bestDepth) {
        best = i + 1;
        bestDepth = depth;
      }
      continue;
    }
    const key = /^\s*("?)([A-Za-z0-9_.-]+)\1\s*=/.exec(line)?.[2];
    if (key === undefined) continue;
    const full = section ? `${section}.${key}` : key;
    const parts = full.split('.');
    if (keys.slice(0, parts.length).join('.') === full && parts.length > bestDepth) {
      best = i + 1;
      bestDepth = parts.length;
    }
  }
  return best;
}

type FileRead = string | { problem: string };

/** A task file: a regular file reached through real folders only, at most `max` bytes, UTF-8. */
async function readTaskFile(dir: string, rel: string, max: number): Promise<FileRead> {
  const parts = rel.split('/');
  let current = dir;
  for (const part of parts.slice(0, -1)) {
    current = path.join(current, part);
    const st = await lstat(current).catch(() => undefined);
    if (!st) return { problem: 'missing' };
    if (!st.isDirectory())
      return { problem: `${part} is ${st.isSymbolicLink() ? 'a symlink' : 'not a folder'}; refused` };
  }
  const file = path.join(dir, rel);
  const st = await lstat(file).catch(() => undefined);
  if (!st) return { problem: 'missing' };
  if (st.isSymbolicLink())
    return { problem: 'a symlink; refused (task files are read without following links)' };
  if (!st.isFile()) return { problem: 'not a regular file' };
  if (st.size > max) return { problem: `larger than ${max} bytes` };
  let handle;
  try {
    handle = await open(file, constants.O_RDONLY | constants.O_NOFOLLOW);
  } catch (error) {
    return { problem: `cannot be read (${error instanceof Error ? error.message : String(error)})` };
  }
  try {
    const buffer = Buffer.alloc(max + 1);
    const { bytesRead } = await handle.read(buffer, 0, max + 1, 0);
    if (bytesRead > max) return { problem: `larger than ${max} bytes` };
    const text = buffer.subarray(0, bytesRead).toString('utf8');
    if (text.includes('\u0000')) return { problem: 'holds NUL bytes: not a text file' };
    return text;
  } finally {
    await handle.close();
  }
}

async function folderKind(dir: string): Promise<'folder' | 'link' | 'missing' | 'other'> {
  const st = await lstat(dir).catch(() => undefined);
  if (!st) return 'missing';
  if (st.isSymbolicLink()) return 'link';
  return st.isDirectory() ? 'folder' : 'other';
}

async function exists(file: string): Promise<boolean> {
  return (await lstat(file).catch(() => undefined)) !== undefined;
}
