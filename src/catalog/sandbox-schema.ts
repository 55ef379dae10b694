/**
 * The catalog's `sandbox:` section: where the sandbox image comes from (a Dockerfile of the
 * repo, or an image as is), how it is built, what every sandbox gets (variables, resources,
 * time limits, runtime) and its egress (`egress-schema.ts`).
 */
import { z } from 'zod';
import { imageRefProblem, RUNTIME_NAME } from '../object-names.js';
import { egressSchema } from './egress-schema.js';
import {
  hasControlCharacter,
  int,
  nonEmpty,
  repoRelativePath,
  typeError,
  variables,
} from './field-checks.js';

export const DEFAULT_TIMEOUTS = {
  commandSec: 120,
  testSec: 600,
  attemptSec: 1800,
  runSec: 3600,
} as const;

const MEMORY = /^(\d+(?:\.\d+)?)\s*([kmgt]?)(i?b?)$/i;
const MEMORY_EXPECTED = 'expected a memory size such as "512m" or "1g", or a number of bytes';
const memory = z.union(
  [z.string().regex(MEMORY, { error: MEMORY_EXPECTED }), z.int().positive({ error: MEMORY_EXPECTED })],
  { error: MEMORY_EXPECTED },
);

const positiveSeconds = z
  .number({ error: 'expected a number of seconds greater than 0' })
  .positive({ error: 'expected a number of seconds greater than 0' });

export const timeoutsSchema = z.strictObject({
  commandSec: positiveSeconds.default(DEFAULT_TIMEOUTS.commandSec),
  testSec: positiveSeconds.default(DEFAULT_TIMEOUTS.testSec),
  attemptSec: positiveSeconds.default(DEFAULT_TIMEOUTS.attemptSec),
  runSec: positiveSeconds.default(DEFAULT_TIMEOUTS.runSec),
  buildSec: positiveSeconds
    .meta({
      description:
        "How long making the sandbox image may take (its build, and the base it needs); past it the build is stopped and the run or eval ends with this field's name. Default: no limit of its own (a run's build still counts against runSec).",
    })
    .optional(),
});

export const resourcesSchema = z.strictObject({
  memory: memory.optional(),
  cpus: z
    .number({ error: 'expected a number of CPUs greater than 0, such as 1 or 0.5' })
    .positive({ error: 'expected a number of CPUs greater than 0, such as 1 or 0.5' })
    .optional(),
  pids: int(16, 1_000_000).optional(),
  diskBytes: memory
    .meta({
      description:
        'Bytes a sandbox may write (workspace, home, caches); default 1g. Enforced by the engine where its storage supports quotas, else by a watchdog that stops the sandbox.',
    })
    .optional(),
});

/**
 * A `.dockerignore` line: Docker's own syntax (`!` re-includes, a leading `/` is the repo
 * root), so only what can never be meant is refused.
 */
function excludePatternProblem(pattern: string): string | undefined {
  if (pattern.trim() === '') return 'an empty pattern excludes nothing';
  if (hasControlCharacter(pattern)) return 'must not contain control characters';
  if (pattern.includes('\\')) return 'use forward slashes; a backslash is not a path separator here';
  if (pattern.replace(/^!/, '').split('/').includes('..'))
    return 'must not contain ".." (the build context is the repo)';
  return undefined;
}

export const buildSchema = z
  .strictObject(
    {
      network: z.boolean({ error: 'expected true or false' }).default(false).meta({
        description:
          'Let the image build steps use the network (to install dependencies at build time). Default false: builds run with network none. Sandboxes never have network either way.',
      }),
      exclude: z
        .array(
          z
            .string({ error: 'expected a pattern in .dockerignore syntax such as "fixtures/keys/**"' })
            .superRefine((value, ctx) => {
              const problem = excludePatternProblem(value);
              if (problem)
                ctx.addIssue({ code: 'custom', message: `pattern ${JSON.stringify(value)} ${problem}` });
            }),
          { error: 'expected a list of patterns in .dockerignore syntax' },
        )
        .default([])
        .meta({
          description:
            "More paths to leave out of the image, in .dockerignore syntax, on top of the repo's .dockerignore (for example test keys the secret scan refuses).",
        }),
    },
    { error: typeError('expected {network: true|false, exclude: [patterns]}') },
  )
  .meta({ description: 'How the sandbox image is built from the repo.' });

/** Commands run once on the untouched repo before the agent starts, and in every verification. */
export const setupSchema = z
  .strictObject(
    {
      command: nonEmpty('a shell command such as "npm run build"').meta({
        description:
          "A shell command run in a sandbox of the untouched repo before the agent starts (network none, the test timeout): generated files, a build, a local install from what the image holds. The agent's sandboxes start from its result (a fork), and what it wrote is never part of the agent's change. Every verification and the baseline run it again, after the change is written and before the tests, so no verdict rests on the agent's copy of it.",
      }),
      shared: z
        .boolean({ error: 'expected true or false' })
        .meta({
          description:
            'In an eval, run the setup once per task and start every trial from it (default false: once per trial). Only for a setup whose result does not vary from run to run.',
        })
        .default(false),
    },
    { error: typeError('expected {command: "...", shared: true|false}') },
  )
  .meta({ description: 'Preparation run once before the agent, repeated in every verification.' });

/** An image name, parsed with the reference grammar before anything uses it (src/names.ts). */
const imageReference = (what: string) =>
  nonEmpty(what).superRefine((value, ctx) => {
    const problem = imageRefProblem(value);
    if (problem) ctx.addIssue({ code: 'custom', message: problem });
  });

export const sandboxSchema = z
  .strictObject({
    dockerfile: repoRelativePath
      .meta({
        description:
          'Dockerfile in the repo to build the sandbox from (default: Dockerfile.sandbox, else the harness image).',
      })
      .optional(),
    image: imageReference('an image reference such as "node:20-bookworm"')
      .meta({ description: 'A prebuilt image to use instead of building one.' })
      .optional(),
    baseImage: imageReference('an image reference such as "node:20-bookworm"')
      .meta({
        description:
          'The image the sandbox recipe builds on, passed as its BASE_IMAGE build argument: "sandbox-harness/base-python:3" for a Python project (make it with `sandbox-harness images ensure python`). Default: the recipe\'s own `ARG BASE_IMAGE=` default, else "sandbox-harness/base-node:20".',
      })
      .optional(),
    buildArgs: variables('build argument').optional(),
    build: buildSchema.optional(),
    env: variables('environment variable').optional(),
    resources: resourcesSchema.optional(),
    timeouts: timeoutsSchema.prefault({}),
    runtime: z
      .string({ error: 'expected a runtime name the engine lists, such as "runc" or "runsc"' })
      .regex(RUNTIME_NAME, {
        error: 'expected a runtime name the engine lists, such as "runc" or "runsc"',
      })
      .meta({
        description:
          "The OCI runtime every sandbox runs under, by the engine's name for it: runc (Docker's default; absent, the engine's default runtime is used: runc on Docker, crun on Podman), runsc (gVisor: a user-space kernel between the sandbox and the host), or any runtime the engine lists (`sandbox-harness doctor`). One the engine lacks is refused before anything is built. `--runtime` overrides it.",
      })
      .optional(),
    egress: egressSchema.optional(),
    setup: setupSchema.optional(),
  })
  .superRefine((sandbox, ctx) => {
    if (sandbox.dockerfile !== undefined && sandbox.image !== undefined) {
      ctx.addIssue({
        code: 'custom',
        path: ['image'],
        message: 'set either sandbox.dockerfile (build) or sandbox.image (use as is), not both',
      });
    }
    if (sandbox.image !== undefined && sandbox.build !== undefined) {
      ctx.addIssue({
        code: 'custom',
        path: ['build'],
        message:
          'sandbox.build only applies when the harness builds the image; remove it or remove sandbox.image',
      });
    }
    if (sandbox.egress?.phases.includes('build') && sandbox.build?.network === true) {
      ctx.addIssue({
        code: 'custom',
        path: ['egress', 'phases'],
        message:
          'egress phase "build" confines the image build to the allowed names, and sandbox.build.network: true gives it the whole network; choose one',
      });
    }
    if (sandbox.egress?.phases.includes('build') && sandbox.image !== undefined) {
      ctx.addIssue({
        code: 'custom',
        path: ['egress', 'phases'],
        message:
          'egress phase "build" only applies when the harness builds the image; sandbox.image is used as is',
      });
    }
    if (sandbox.image !== undefined && sandbox.baseImage !== undefined) {
      ctx.addIssue({
        code: 'custom',
        path: ['baseImage'],
        message:
          'sandbox.baseImage only applies when the harness builds the image; remove it or remove sandbox.image',
      });
    }
  });

const UNITS: Record<string, number> = { '': 1, k: 1024, m: 1024 ** 2, g: 1024 ** 3, t: 1024 ** 4 };

/** `"512m"`, `"1g"`, `"1.5GiB"` or a number of bytes, as bytes (binary units, like Docker). */
export function memoryBytes(value: string | number): number {
  if (typeof value === 'number') return value;
  const match = MEMORY.exec(value.trim());
  if (!match) throw new RangeError(`not a memory size: ${JSON.stringify(value)}`);
  const unit = UNITS[(match[2] ?? '').toLowerCase()] ?? 1;
  return Math.round(Number(match[1]) * unit);
}
