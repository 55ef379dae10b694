/**
 * The suite file: a YAML list of tasks (catalog, ticket, repo, cassettes, a seed run) and the
 * eval's defaults. Validated with the catalog's error quality (every problem at once, each
 * with file:line:col), every path made absolute against the suite file. It takes whatever no
 * other source recognised (it is tried last), so an unknown file gets its errors.
 */
import { existsSync, statSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import { sha256 } from '../../changes/hash.js';
import { AGENT_KINDS_IN_CATALOG } from '../../catalog/agent-schema.js';
import { ConfigError } from '../../errors.js';
import { problemsError, validateYaml, type ParsedYaml, type ValidationProblem } from '../../yaml-validate.js';
import { suiteDefaults, suiteDefaultsSchema, type Suite, type SuiteTask } from '../suite.js';
import type { TaskSource } from './task-source.js';

export const suiteSource: TaskSource = {
  name: 'suite',
  title: 'suite files',
  flags: [],
  recognises: async () => true,
  async open(input) {
    const suite = await loadSuite(input.file, { displayPath: input.displayPath });
    return { name: suite.name, make: async () => ({ suite }) };
  },
};

export interface LoadSuiteOptions {
  /** The file name shown in problems (e.g. relative to the working directory). */
  displayPath?: string;
}

// Ids end up in file names and report anchors; keep them boring.
const TASK_ID = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;

function existingPath(baseDir: string, what: string) {
  return z
    .string()
    .min(1)
    .superRefine((value, ctx) => {
      const resolved = path.resolve(baseDir, value);
      if (!existsSync(resolved)) {
        ctx.addIssue({
          code: 'custom',
          message: `${what} not found: ${resolved} (paths are relative to the suite file)`,
        });
      }
    });
}

function suiteSchema(baseDir: string) {
  const cassette = existingPath(baseDir, 'cassette');
  const task = z.strictObject({
    id: z
      .string()
      .regex(TASK_ID, 'expected an id of letters, digits, ".", "_" or "-" (not starting with a symbol)'),
    catalog: existingPath(baseDir, 'catalog'),
    // Not trimmed: inline ticket text is passed on exactly as written.
    ticket: z.string().refine((t) => t.trim() !== '', 'ticket is empty: expected a ticket path, id or text'),
    repo: existingPath(baseDir, 'repo').optional(),
    cassette: z.union([cassette, z.array(cassette).min(1)]).optional(),
    mustNotTouch: z.array(z.string().min(1, 'expected a non-empty glob')).optional(),
    // A run folder (it has run.json): each trial starts from its last conversation and patch.
    seedRun: existingPath(baseDir, 'seed run folder')
      .refine((p) => existsSync(path.join(path.resolve(baseDir, p), 'run.json')), {
        message: 'expected the folder of a recorded run (it has run.json)',
      })
      .optional(),
    // The task's own agent, over its catalog's agent.kind; `eval --agent` wins over both.
    agent: z
      .enum(AGENT_KINDS_IN_CATALOG, { error: `expected one of ${AGENT_KINDS_IN_CATALOG.join(', ')}` })
      .optional(),
  });
  return z.strictObject({
    name: z.string().min(1),
    defaults: suiteDefaultsSchema,
    tasks: z.array(task).min(1),
  });
}

type RawSuite = z.infer<ReturnType<typeof suiteSchema>>;

/** Reads, validates and resolves a suite file. Throws ConfigError listing every problem. */
export async function loadSuite(file: string, options: LoadSuiteOptions = {}): Promise<Suite> {
  const absolute = path.resolve(file);
  let bytes: Buffer;
  try {
    bytes = await readFile(absolute);
  } catch (error) {
    throw new ConfigError(`cannot read suite file ${options.displayPath ?? file}`, [], {
      cause: error,
      hint: 'pass the path of a suite YAML file',
    });
  }
  return parseSuite(absolute, bytes, options);
}

/** Validates suite text already read from `file` (absolute or relative to the working directory). */
export function parseSuite(file: string, bytes: Buffer | string, options: LoadSuiteOptions = {}): Suite {
  const absolute = path.resolve(file);
  const baseDir = path.dirname(absolute);
  const text = typeof bytes === 'string' ? bytes : bytes.toString('utf8');
  const result = validateYaml(file, text, suiteSchema(baseDir), { displayPath: options.displayPath ?? file });

  // Duplicate ids are checked on the raw data so they are reported together with schema
  // problems, not only once everything else is fixed.
  const problems = [...(result.ok ? [] : result.problems), ...duplicateIdProblems(result.parsed)];
  if (problems.length > 0 || !result.ok) {
    problems.sort((a, b) => a.line - b.line || a.column - b.column);
    throw problemsError(result.parsed.file, problems);
  }
  return resolveSuite(absolute, sha256(bytes), result.value);
}

function duplicateIdProblems(parsed: ParsedYaml): ValidationProblem[] {
  const tasks = (parsed.data as { tasks?: unknown } | null | undefined)?.tasks;
  if (!Array.isArray(tasks)) return [];
  const firstSeen = new Map<string, number>();
  const problems: ValidationProblem[] = [];
  tasks.forEach((task: unknown, index) => {
    const id = (task as { id?: unknown } | null)?.id;
    if (typeof id !== 'string') return;
    const first = firstSeen.get(id);
    if (first === undefined) {
      firstSeen.set(id, index);
      return;
    }
    const at = parsed.locate(['tasks', first, 'id']);
    problems.push({
      file: parsed.file,
      ...parsed.locate(['tasks', index, 'id']),
      path: `tasks[${index}].id`,
      message: `duplicate task id ${JSON.stringify(id)} (first used at line ${at.line}:${at.column})`,
    });
  });
  return problems;
}

function resolveSuite(file: string, hash: string, raw: RawSuite): Suite {
  const baseDir = path.dirname(file);
  const resolve = (p: string): string => path.resolve(baseDir, p);
  const tasks = raw.tasks.map((t): SuiteTask => {
    const task: SuiteTask = {
      id: t.id,
      catalog: resolve(t.catalog),
      ticket: resolveTicket(baseDir, t.ticket),
    };
    if (t.repo !== undefined) task.repo = resolve(t.repo);
    if (t.cassette !== undefined)
      task.cassettes = (Array.isArray(t.cassette) ? t.cassette : [t.cassette]).map(resolve);
    if (t.mustNotTouch !== undefined) task.mustNotTouch = [...t.mustNotTouch];
    if (t.seedRun !== undefined) task.seedRun = resolve(t.seedRun);
    if (t.agent !== undefined) task.agent = t.agent;
    return task;
  });
  return { file, sha256: hash, name: raw.name, defaults: suiteDefaults(raw.defaults), tasks };
}

/**
 * A ticket that names a file next to the suite becomes an absolute path, so the trial runner
 * (whose working directory is not the suite's) finds the same file; ids and inline text are
 * passed on untouched.
 */
function resolveTicket(baseDir: string, ticket: string): string {
  if (ticket.includes('\n')) return ticket;
  const candidate = path.resolve(baseDir, ticket);
  try {
    if (statSync(candidate).isFile()) return candidate;
  } catch {
    // Not a file: an id or inline text.
  }
  return ticket;
}
