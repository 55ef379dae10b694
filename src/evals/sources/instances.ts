/**
 * SWE-bench-style instances as an eval source: one JSON object per line (`instance_id`,
 * `repo`, `base_commit`, `problem_statement`, `patch`, `test_patch`, `FAIL_TO_PASS`,
 * `PASS_TO_PASS`), validated with file:line errors. Lists come as JSON lists or as
 * JSON-encoded strings, as the published datasets have them.
 *
 * An instance suite (YAML with `instances:`) adds what a line does not say: where the local
 * clones are, each repo's test command and report, what else the working copy needs
 * (dependencies installed in the clone's folder), and the eval's defaults.
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import { problemsError, validateYaml } from '../../yaml-validate.js';
import { egressSchema } from '../../catalog/egress-schema.js';
import { sha256 } from '../../changes/hash.js';
import { ConfigError } from '../../errors.js';
import { TEST_LOG_FORMATS } from '../../outcomes.js';
import { suiteDefaults, suiteDefaultsSchema, type SuiteDefaults } from '../suite.js';
import {
  environmentFields,
  environmentProblem,
  imageName,
  type Environment,
} from './instance-environment.js';

// Ids end up in folder names, run ids and report anchors.
const INSTANCE_ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

/** A list of test ids, as a JSON list or a JSON-encoded string of one (SWE-bench's datasets). */
const testList = z.preprocess(
  (value) => {
    if (typeof value !== 'string') return value;
    try {
      return JSON.parse(value) as unknown;
    } catch {
      return value;
    }
  },
  z.array(z.string().min(1, 'expected a non-empty test id'), {
    error: 'expected a list of test ids (a JSON list, or a string holding one)',
  }),
);

export const instanceSchema = z
  .looseObject({
    instance_id: z
      .string({ error: 'expected an instance id' })
      .regex(INSTANCE_ID, 'expected an id of letters, digits, ".", "_" or "-" (at most 128)'),
    repo: z
      .string({ error: 'expected the repo as "owner/name"' })
      .regex(
        /^[A-Za-z0-9][A-Za-z0-9._-]*(\/[A-Za-z0-9][A-Za-z0-9._-]*)?$/,
        'expected the repo as "owner/name"',
      ),
    base_commit: z
      .string({ error: 'expected a commit id' })
      .regex(/^[0-9a-f]{7,64}$/, 'expected a commit id (hex)'),
    problem_statement: z.string({ error: 'expected the problem statement' }).refine((s) => s.trim() !== '', {
      message: 'the problem statement is empty',
    }),
    patch: z.string({ error: 'expected the gold patch (a unified diff)' }),
    test_patch: z.string({ error: 'expected the test patch (a unified diff)' }),
    FAIL_TO_PASS: testList,
    PASS_TO_PASS: testList,
    /** Not SWE-bench's own: a test command for this instance (SWE-PolyBench has one). */
    test_command: z.string().min(1).optional(),
    /** A prebuilt image the instance runs in as it is (SWE-bench-derived datasets' name for it). */
    image_name: imageName('an image reference', false).optional(),
    /** Not SWE-bench's own: the image the working copy is built on (`node`, `python` or a reference). */
    base_image: imageName('"node", "python" or an image reference', true).optional(),
  })
  .refine((line) => line.image_name === undefined || line.base_image === undefined, {
    message: 'set image_name (used as it is) or base_image (built on), not both',
    path: ['base_image'],
  });

export type Instance = z.infer<typeof instanceSchema>;

export interface LoadedInstances {
  file: string;
  instances: Instance[];
  sha256: string;
}

const MAX_LINE_BYTES = 64 * 1024 * 1024;

/** Reads and validates a JSONL file of instances. Throws ConfigError listing every problem, each at file:line. */
export async function loadInstances(file: string, displayPath = file): Promise<LoadedInstances> {
  let bytes: Buffer;
  try {
    bytes = await readFile(file);
  } catch (error) {
    throw new ConfigError(`cannot read instances file ${displayPath}`, [], {
      cause: error,
      hint: 'pass the path of a JSONL file, one SWE-bench-style instance per line',
    });
  }
  return { file, ...parseInstances(bytes.toString('utf8'), displayPath), sha256: sha256(bytes) };
}

export function parseInstances(text: string, displayPath: string): { instances: Instance[] } {
  const problems: string[] = [];
  const instances: Instance[] = [];
  const seen = new Map<string, number>();
  text.split('\n').forEach((raw, index) => {
    const line = index + 1;
    const where = `${displayPath}:${line}`;
    if (raw.trim() === '') return;
    if (raw.length > MAX_LINE_BYTES) {
      problems.push(`${where}: the line is longer than ${MAX_LINE_BYTES} characters`);
      return;
    }
    let json: unknown;
    try {
      json = JSON.parse(raw);
    } catch (error) {
      problems.push(
        `${where}: not a JSON object (${error instanceof Error ? error.message : String(error)})`,
      );
      return;
    }
    const parsed = instanceSchema.safeParse(json);
    if (!parsed.success) {
      for (const issue of parsed.error.issues)
        problems.push(`${where}: ${issue.path.join('.') || '(line)'}: ${issue.message}`);
      return;
    }
    const first = seen.get(parsed.data.instance_id);
    if (first !== undefined) {
      problems.push(
        `${where}: instance_id ${JSON.stringify(parsed.data.instance_id)} is used twice (first at line ${first})`,
      );
      return;
    }
    seen.set(parsed.data.instance_id, line);
    instances.push(parsed.data);
  });
  if (problems.length === 0 && instances.length === 0)
    problems.push(`${displayPath}: no instances in the file`);
  if (problems.length > 0) {
    throw new ConfigError(
      [`${displayPath} is not valid (${problems.length} problem(s)):`, ...problems.map((p) => `  ${p}`)].join(
        '\n',
      ),
      problems,
    );
  }
  return { instances };
}

// ---------------------------------------------------------------------------------------
// Instance suites

const glob = z.string().min(1, 'expected a non-empty glob');

const oneEnvironment = (env: Environment, ctx: z.RefinementCtx) => {
  const problem = environmentProblem(env);
  if (problem) ctx.addIssue({ code: 'custom', message: problem, path: ['dockerfile'] });
};

export const repoSpecSchema = z
  .strictObject({
    testCommand: z.string().min(1, 'expected a shell command').meta({
      description: 'Runs the tests and writes the JUnit report at testReport (e.g. vitest --reporter=junit).',
    }),
    testReport: z.string().min(1, 'expected a workspace-relative path').default('reports/junit.xml'),
    /** Per-test results from the test command's output instead of a report file (`test-results/test-log.ts`). */
    testLog: z
      .enum(TEST_LOG_FORMATS, {
        error: `expected the runner whose output holds the results: ${TEST_LOG_FORMATS.join(', ')}`,
      })
      .optional(),
    ...environmentFields,
    editableFiles: z.array(glob).min(1).optional(),
    /** Folders or files of the local clone's folder copied into every working copy (dependencies: the build has no network). */
    carry: z.array(z.string().min(1)).default([]),
    maxAttempts: z.number().int().min(1).max(10).default(1),
    /** Business rules for the catalog (injected into the sandbox as in any catalog). */
    rules: z
      .record(
        z.string(),
        z.strictObject({
          value: z.union([z.number(), z.string(), z.boolean()]),
          unit: z.string().optional(),
          source: z.string().optional(),
          description: z.string().optional(),
        }),
      )
      .default({}),
    maxTurns: z.number().int().min(1).max(500).optional(),
    testSec: z.number().positive().optional(),
    /** The catalog's sandbox.egress for every instance of this repo (absent: no network, as always). */
    egress: egressSchema.optional(),
  })
  .superRefine(oneEnvironment);

export type RepoSpec = z.output<typeof repoSpecSchema>;

function instanceSuiteSchema() {
  return z
    .strictObject({
      name: z.string().regex(INSTANCE_ID, 'expected a name of letters, digits, ".", "_" or "-"'),
      instances: z.string().min(1, 'expected the path of a JSONL file of instances'),
      repos: z.string().min(1).optional(),
      visibleTests: z.boolean().default(false),
      /** A folder with `<instance_id>.json` cassettes (a recorded model per instance). */
      cassettes: z.string().min(1).optional(),
      repoSpecs: z.record(z.string(), repoSpecSchema).default({}),
      /** Every instance's environment unless its line or its repo's spec names one. */
      ...environmentFields,
      defaults: suiteDefaultsSchema,
    })
    .superRefine(oneEnvironment);
}

export interface InstanceSuite {
  /** Absolute path of the suite file (or of the JSONL file when there is none). */
  file: string;
  name: string;
  instances: LoadedInstances;
  /** Absolute. */
  repos?: string;
  visibleTests: boolean;
  cassettes?: string;
  repoSpecs: Record<string, RepoSpec>;
  /** The suite's default environment (`dockerfile` relative to the suite file's folder). */
  environment?: Environment;
  defaults: SuiteDefaults;
  /** Of the suite file's bytes and the instances' (resume checks it). */
  sha256: string;
}

/** Whether a YAML suite file is an instance suite (has `instances:`), without validating it. */
export function looksLikeInstanceSuite(text: string): boolean {
  return /^instances\s*:/m.test(text);
}

export async function loadInstanceSuite(file: string, displayPath = file): Promise<InstanceSuite> {
  const bytes = await readFile(file);
  const result = validateYaml(file, bytes.toString('utf8'), instanceSuiteSchema(), { displayPath });
  if (!result.ok) throw problemsError(result.parsed.file, result.problems);
  const raw = result.value;
  const base = path.dirname(file);
  const instancesFile = path.resolve(base, raw.instances);
  const instances = await loadInstances(instancesFile, path.join(path.dirname(displayPath), raw.instances));
  return {
    file,
    name: raw.name,
    instances,
    ...(raw.repos !== undefined ? { repos: path.resolve(base, raw.repos) } : {}),
    visibleTests: raw.visibleTests,
    ...(raw.cassettes !== undefined ? { cassettes: path.resolve(base, raw.cassettes) } : {}),
    repoSpecs: raw.repoSpecs,
    environment: {
      ...(raw.image !== undefined ? { image: raw.image } : {}),
      ...(raw.baseImage !== undefined ? { baseImage: raw.baseImage } : {}),
      ...(raw.dockerfile !== undefined ? { dockerfile: raw.dockerfile } : {}),
    },
    defaults: suiteDefaults(raw.defaults),
    sha256: sha256(Buffer.concat([bytes, Buffer.from(instances.sha256)])),
  };
}

/** A bare JSONL file: an instance suite with every default (repos, specs and flags from the command line). */
export async function bareInstanceSuite(file: string, displayPath = file): Promise<InstanceSuite> {
  const instances = await loadInstances(file, displayPath);
  return {
    file,
    name:
      path
        .basename(file)
        .replace(/\.jsonl$/i, '')
        .replace(/[^A-Za-z0-9._-]/g, '-') || 'instances',
    instances,
    visibleTests: false,
    repoSpecs: {},
    defaults: suiteDefaults(),
    sha256: instances.sha256,
  };
}
