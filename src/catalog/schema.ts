/**
 * The service catalog (`catalog/<service>.yaml`): business rules, what the agent may edit,
 * how to test, and how to build the sandbox. Every object is strict because a typo in a
 * key (`editableFile:`) would otherwise silently drop a rule or widen nothing.
 *
 * Custom messages here follow the convention of `yaml-validate.ts`: for type/range checks
 * they are the "expected …" clause; for refinements they are the whole sentence.
 */
import picomatch from 'picomatch';
import { z } from 'zod';
import { priceTableSchema } from '../llm/cost.js';
import { imageRefProblem, RUNTIME_NAME } from '../names.js';
import { isIP } from 'node:net';
import { parseHostPattern } from '../sandbox/egress/policy.js';

import { DEFAULT_IGNORED_NAMES } from './ignore-defaults.js';

export const DEFAULT_TIMEOUTS = {
  commandSec: 120,
  testSec: 600,
  attemptSec: 1800,
  runSec: 3600,
} as const;

export const DEFAULT_MAX_ATTEMPTS = 3;
export const DEFAULT_MAX_TURNS = 30;

// ---------------------------------------------------------------------------------------
// Globs and repo-relative paths

/**
 * Why a glob cannot be used in an allowlist, or undefined if it can. Negation is refused
 * because a lone `!x` in picomatch matches everything except `x`: one character would turn
 * an allowlist into a denylist.
 */
export function globProblem(glob: string): string | undefined {
  if (glob.trim() === '') return 'an empty pattern matches nothing';
  if (glob.startsWith('!')) return 'negated patterns ("!…") are not supported: list what IS editable';
  if (glob.includes('\\')) return 'use forward slashes; a backslash is not a path separator here';
  if (glob.startsWith('/') || /^[A-Za-z]:/.test(glob))
    return 'must be relative to the repo root, not absolute';
  if (glob.startsWith('./')) return 'write it relative to the repo root without a leading "./"';
  if (glob.split('/').includes('..')) return 'must not contain ".." (it has to stay inside the repo)';
  if (hasControlCharacter(glob)) return 'must not contain control characters';
  try {
    picomatch.makeRe(glob, { strictBrackets: true, dot: true });
  } catch (error) {
    return `is not a valid glob: ${error instanceof Error ? error.message : String(error)}`;
  }
  return undefined;
}

export function hasControlCharacter(text: string): boolean {
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (code < 0x20 || (code >= 0x7f && code < 0xa0)) return true;
  }
  return false;
}

const glob = z
  .string({ error: 'expected a glob pattern such as "src/**/*.ts"' })
  .superRefine((value, ctx) => {
    const problem = globProblem(value);
    if (problem) ctx.addIssue({ code: 'custom', message: `glob ${JSON.stringify(value)} ${problem}` });
  });

function relativePathProblem(path: string): string | undefined {
  if (path.trim() === '') return 'must not be empty';
  if (path.startsWith('/') || /^[A-Za-z]:/.test(path)) return 'must be relative to the repo, not absolute';
  if (path.includes('\\')) return 'use forward slashes';
  if (path.split('/').includes('..')) return 'must not contain ".." (it has to stay inside the repo)';
  return undefined;
}

const repoRelativePath = z
  .string({ error: 'expected a path relative to the repo' })
  .superRefine((value, ctx) => {
    const problem = relativePathProblem(value);
    if (problem) ctx.addIssue({ code: 'custom', message: `path ${JSON.stringify(value)} ${problem}` });
  });

// ---------------------------------------------------------------------------------------
// Secrets

const SECRET_NAME = /KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL/i;

const TOKEN_SHAPES: { pattern: RegExp; what: string }[] = [
  { pattern: /^sk-[A-Za-z0-9_-]{16,}/, what: 'an API key ("sk-…")' },
  { pattern: /^(gh[pousr]_|github_pat_)[A-Za-z0-9_]{20,}/, what: 'a GitHub token' },
  { pattern: /^(AKIA|ASIA)[A-Z0-9]{16}$/, what: 'an AWS access key id' },
  { pattern: /^xox[abprs]-/, what: 'a Slack token' },
  { pattern: /^glpat-[A-Za-z0-9_-]{20,}/, what: 'a GitLab token' },
  { pattern: /^AIza[0-9A-Za-z_-]{35}$/, what: 'a Google API key' },
  { pattern: /^npm_[A-Za-z0-9]{36}$/, what: 'an npm token' },
  { pattern: /^eyJ[\w-]+\.[\w-]+\.[\w-]+$/, what: 'a JSON Web Token' },
  { pattern: /-----BEGIN [A-Z ]*PRIVATE KEY-----/, what: 'a private key' },
  { pattern: /^[a-z][a-z0-9+.-]*:\/\/[^/\s:@]+:[^/\s@]+@/i, what: 'a URL with a password in it' },
];

function shannonBits(value: string): number {
  const counts = new Map<string, number>();
  for (const ch of value) counts.set(ch, (counts.get(ch) ?? 0) + 1);
  let bits = 0;
  for (const count of counts.values()) {
    const p = count / value.length;
    bits -= p * Math.log2(p);
  }
  return bits;
}

/** What kind of credential a value looks like, or undefined. Never returns the value itself. */
export function secretShape(value: string): string | undefined {
  for (const { pattern, what } of TOKEN_SHAPES) if (pattern.test(value)) return what;
  // Long unbroken runs of mixed letters and digits with high entropy are how most keys look;
  // paths, versions and sentences have separators or repeat themselves.
  if (
    value.length >= 32 &&
    /^[A-Za-z0-9+/=_.-]+$/.test(value) &&
    /[A-Za-z]/.test(value) &&
    /[0-9]/.test(value) &&
    shannonBits(value) >= 3.5
  ) {
    return 'a long random string (an API key or token)';
  }
  return undefined;
}

/** Why a variable must not reach a sandbox, or undefined. */
export function secretProblem(name: string, value: string): string | undefined {
  const named = SECRET_NAME.exec(name);
  if (named) {
    return `refused: the name contains "${named[0].toUpperCase()}", which marks a secret; sandboxes never receive credentials`;
  }
  const shape = secretShape(value);
  if (shape) return `refused: the value looks like ${shape}; sandboxes never receive credentials`;
  return undefined;
}

// YAML reads `PORT: 8080` as a number; the process environment only knows strings.
const envValue = z
  .union([z.string(), z.number(), z.boolean()], { error: 'expected a string, number or boolean value' })
  .transform((value) => String(value));

const variables = (what: string) =>
  z
    .record(
      z
        .string()
        .regex(/^[A-Za-z_][A-Za-z0-9_]*$/, { error: `expected a ${what} name of letters, digits and "_"` }),
      envValue,
      { error: `expected a mapping of ${what} NAME: value` },
    )
    .superRefine((record, ctx) => {
      for (const [name, value] of Object.entries(record)) {
        const problem = secretProblem(name, value);
        if (problem) ctx.addIssue({ code: 'custom', path: [name], message: problem });
      }
    });

// ---------------------------------------------------------------------------------------
// Sections

const nonEmpty = (what: string) =>
  z.string({ error: `expected ${what}` }).min(1, { error: `expected ${what}` });

/** An image name, parsed with the reference grammar before anything uses it (src/names.ts). */
const imageReference = (what: string) =>
  nonEmpty(what).superRefine((value, ctx) => {
    const problem = imageRefProblem(value);
    if (problem) ctx.addIssue({ code: 'custom', message: problem });
  });

/**
 * A message for a value of the wrong type only; other issues of the same schema (unknown
 * keys, in particular) keep the generic, more specific wording.
 */
const typeError = (message: string) => (issue: { code?: string }) =>
  issue.code === 'invalid_type' ? message : undefined;

export const ruleSchema = z
  .strictObject(
    {
      value: z.union([z.number(), z.string(), z.boolean()], {
        error: 'expected a number, string or boolean',
      }),
      unit: z.string({ error: 'expected a unit such as "EUR" or "days"' }).optional(),
      source: z.string({ error: 'expected where the rule comes from (a document, a person)' }).optional(),
      description: z.string({ error: 'expected a description' }).optional(),
    },
    { error: typeError('expected a rule such as {value: 50, unit: EUR}') },
  )
  .meta({ description: 'A business rule the agent must respect; tests in the sandbox can read it too.' });

const layerName = z
  .string({ error: 'expected a layer name such as "unit" or "e2e"' })
  .regex(/^[A-Za-z0-9][A-Za-z0-9._-]*$/, {
    error: 'expected a layer name of letters, digits, ".", "_" or "-"',
  });

export const testLayerSchema = z.strictObject({
  name: layerName,
  command: nonEmpty('a shell command'),
});

const testCommand = z
  .union(
    [nonEmpty('a shell command'), z.array(testLayerSchema).min(1, { error: 'expected at least one layer' })],
    {
      error: 'expected a shell command, or a list of layers such as [{name: unit, command: "npm test"}]',
    },
  )
  .superRefine((value, ctx) => {
    if (typeof value === 'string') return;
    const seen = new Set<string>();
    for (const [i, layer] of value.entries()) {
      if (seen.has(layer.name)) {
        ctx.addIssue({
          code: 'custom',
          path: [i, 'name'],
          message: `layer name "${layer.name}" is used twice`,
        });
      }
      seen.add(layer.name);
    }
  })
  .meta({ description: 'One command, or named layers run in order, stopping at the first failing layer.' });

export const PROVIDER_NAMES = ['anthropic', 'openai', 'replay'] as const;

const int = (min: number, max: number) =>
  z
    .int({ error: `expected an integer from ${min} to ${max}` })
    .min(min, { error: `expected an integer from ${min} to ${max}` })
    .max(max, { error: `expected an integer from ${min} to ${max}` });

const ignoreGlobs = z.array(glob, { error: 'expected a list of glob patterns' });

/**
 * `agent.ignoreChanges`: what is not the agent's change, on top of the harness's defaults
 * (the ecosystems' caches) and the repo's own `.gitignore` files. A list is the old form
 * and means `add`.
 */
export const ignoreChangesSchema = z
  .union(
    [
      ignoreGlobs.meta({ description: 'Globs to ignore on top of the defaults (the same as `add`).' }),
      z.strictObject({
        add: ignoreGlobs.optional().meta({
          description:
            "Globs (repo-relative, picomatch) of new paths that are not the agent's change, on top of the defaults and .gitignore.",
        }),
        disable: z
          .array(
            z.enum(DEFAULT_IGNORED_NAMES as [string, ...string[]], {
              error: `expected the name of a default: ${DEFAULT_IGNORED_NAMES.join(', ')}`,
            }),
            { error: 'expected a list of default names' },
          )
          .optional()
          .meta({
            description: `Defaults to turn off, by name (their paths are then gated like any other): ${DEFAULT_IGNORED_NAMES.join(', ')}.`,
          }),
        gitignore: z.boolean({ error: 'expected true or false' }).optional().meta({
          description:
            "Whether new paths that the repo's own pristine .gitignore files ignore are dropped (default true).",
        }),
      }),
    ],
    { error: 'expected a list of globs, or {add: [globs], disable: [default names], gitignore: true|false}' },
  )
  .meta({
    description:
      "New paths that are not the agent's change (build and test output): never gated, never copied back, never verified, listed in the run record. Always: git's files under .git/, the ecosystems' caches (see `disable`), and what the repo's pristine .gitignore files ignore. A path of the pristine repo is never ignored. A list adds globs.",
  });

export const agentSchema = z.strictObject({
  editableFiles: z
    .array(glob, { error: 'expected a list of glob patterns' })
    .min(1, {
      error: 'expected at least one glob pattern (an empty list would let the agent change nothing)',
    })
    .meta({
      description:
        'Globs (repo-relative, picomatch) of the files the agent may change. Everything else is refused.',
    }),
  testCommand,
  maxAttempts: int(1, 10).default(DEFAULT_MAX_ATTEMPTS),
  maxTurns: int(1, 500).default(DEFAULT_MAX_TURNS),
  tokenBudget: z
    .int({ error: 'expected a positive integer number of tokens' })
    .positive({ error: 'expected a positive integer number of tokens' })
    .optional(),
  ignoreChanges: ignoreChangesSchema.optional(),
  heldOutTests: z.array(glob, { error: 'expected a list of glob patterns' }).default([]).meta({
    description:
      'Globs of test files the agent never sees: absent from every attempt sandbox, present when the change is verified. A change to them is refused.',
  }),
  review: z
    .strictObject({
      provider: z
        .enum(PROVIDER_NAMES, { error: 'expected one of "anthropic", "openai" or "replay"' })
        .optional(),
      model: nonEmpty('a model name').optional(),
      maxRounds: int(1, 10).default(2),
      maxTurns: int(1, 100).default(12),
    })
    .optional()
    .meta({
      description:
        "Review every verified attempt with an independent checker (a fresh context, read-only tools, a throwaway sandbox): ready-for-review then needs its approval. provider/model default to the maker's; maxRounds bounds the reviews of a run.",
    }),
  docs: z.array(glob, { error: 'expected a list of glob patterns' }).default(['docs/*.md']).meta({
    description:
      "Globs of the repo's topic documents: the system prompt lists each with its first line, and the agent reads one with read_doc when it needs it. [] turns it off.",
  }),
  skills: z.array(glob, { error: 'expected a list of glob patterns' }).default([]).meta({
    description:
      'Globs of skill folders, each with a SKILL.md whose front matter gives name and description (when it applies): listed in the system prompt, loaded by the skill tool.',
  }),
  costLimit: z
    .number({ error: 'expected a positive number of US dollars' })
    .positive({ error: 'expected a positive number of US dollars' })
    .optional()
    .meta({
      description:
        'Stop the run once its model calls (maker, sub-agents and checker together) cost this many US dollars; the run ends `budget`. Needs a price for every model used (agent.prices or the built-in table).',
    }),
  prices: priceTableSchema.optional().meta({
    description:
      'Model prices in US dollars per million tokens ({input, output, cacheRead?, cacheWrite?}), by model name or a prefix ending in `*`; they override the built-in table (prices/default.yaml) model by model.',
  }),
  delegate: z.boolean({ error: 'expected true or false' }).default(false).meta({
    description:
      'Offer the `delegate` tool: the agent hands a sub-task to a sub-agent with an empty context (same sandbox and tools, shared maxTurns and tokenBudget) and gets back only its conclusion. Off by default because it changes the tool list every model call sees.',
  }),
  testReport: z
    .strictObject(
      {
        format: z.literal('junit', { error: 'expected "junit" (the one report format read today)' }).meta({
          description: 'The report format: JUnit XML, which vitest, jest, mocha, node:test and pytest write.',
        }),
        path: repoRelativePath.meta({
          description:
            'Where the test command writes the report, relative to the workspace. Removed before the tests run; read back (bounded, no symlink) after, as hostile data.',
        }),
        failToPass: z.array(nonEmpty('a test id'), { error: 'expected a list of test ids' }).optional().meta({
          description:
            "Tests that must pass (SWE-bench FAIL_TO_PASS). With failToPass or passToPass set, a verification passes only when every named test passed in the report (skipped or missing is not passed); the test command's exit code is recorded next to it. Ids: `file > suite > name`, or pytest's `file::Class::name`.",
        }),
        passToPass: z
          .array(nonEmpty('a test id'), { error: 'expected a list of test ids' })
          .optional()
          .meta({ description: 'Tests that must still pass (SWE-bench PASS_TO_PASS).' }),
        quarantined: z
          .array(nonEmpty('a test id'), { error: 'expected a list of test ids' })
          .default([])
          .meta({
            description:
              'Named tests left out of failToPass and passToPass (found flaky by `eval --oracle --quarantine`); recorded with every run.',
          }),
      },
      { error: typeError('expected {format: junit, path: "reports/junit.xml"}') },
    )
    .optional()
    .meta({
      description:
        'Per-test results: a report file the test command writes in the sandbox, shown in the run record, inspect, the viewer and eval reports.',
    }),
  reward: z
    .strictObject(
      {
        dir: repoRelativePath.meta({
          description:
            'Workspace folder where the test command leaves reward.txt (one number) or reward.json (named numbers, the score under "reward"). Removed before the tests run; read back (bounded, no symlink) after, as hostile data.',
        }),
      },
      { error: typeError('expected {dir: ".harbor-verifier"}') },
    )
    .optional()
    .meta({
      description:
        "A reward instead of the exit code decides verification (Harbor's verifier): the change is verified when the score is at least 1; the score is recorded with the attempt and the eval trial.",
    }),
  verifierFiles: z
    .strictObject(
      {
        from: nonEmpty('a folder, relative to this catalog file').meta({
          description: 'Host folder (relative to this catalog file) whose regular files are placed.',
        }),
        to: z
          .string({ error: 'expected an absolute path such as "/tests"' })
          .regex(/^\/[A-Za-z0-9._/-]*$/, { error: 'expected an absolute path such as "/tests"' })
          .refine((p) => !p.split('/').includes('..') && p !== '/' && !/^\/workspace(\/|$)/.test(p), {
            error: 'expected an absolute folder outside /workspace, without ".."',
          })
          .meta({
            description: 'Where they go in the sandbox (outside /workspace), root-owned and read-only.',
          }),
      },
      { error: typeError('expected {from: "tests", to: "/tests"}') },
    )
    .optional()
    .meta({
      description:
        "Files only the baseline and the verification sandboxes get (Harbor's tests/): never in an agent's sandbox, so the agent cannot read or change them.",
    }),
});

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

/** Where a sandbox (or the image build) may have egress; everything else runs with network none. */
export const EGRESS_PHASES = ['agent', 'baseline', 'verify', 'build'] as const;

const hostPatternSchema = z
  .string({
    error: 'expected a host name such as "registry.npmjs.org", "*.example.com" or "mirror.corp:8443"',
  })
  .superRefine((value, ctx) => {
    const parsed = parseHostPattern(value);
    if (typeof parsed === 'string')
      ctx.addIssue({ code: 'custom', message: `${JSON.stringify(value)}: ${parsed}` });
  });

const portsSchema = z
  .array(int(1, 65535), { error: 'expected a list of port numbers such as [443, 80]' })
  .min(1, { error: 'expected at least one port' });

const egressRuleSchema = z.union(
  [
    hostPatternSchema,
    z.strictObject({
      host: hostPatternSchema,
      ports: portsSchema.optional(),
      except: z.array(hostPatternSchema, { error: 'expected a list of host patterns' }).optional().meta({
        description: 'Names this rule does not cover (for a deny rule: names it lets through to allow).',
      }),
    }),
  ],
  { error: 'expected a host pattern or {host, ports, except}' },
);

const cidrSchema = z
  .string({ error: 'expected an address range such as "10.20.0.0/16"' })
  .superRefine((value, ctx) => {
    const [address, bits, extra] = value.split('/');
    const family = isIP(address ?? '');
    const max = family === 6 ? 128 : 32;
    const prefix = Number(bits);
    if (
      family === 0 ||
      extra !== undefined ||
      bits === undefined ||
      !Number.isInteger(prefix) ||
      prefix < 0 ||
      prefix > max
    ) {
      ctx.addIssue({
        code: 'custom',
        message: `${JSON.stringify(value)}: expected an address range such as "10.20.0.0/16"`,
      });
    }
  });

const resolverSchema = z
  .string({ error: 'expected a name server address such as "10.0.0.53"' })
  .superRefine((value, ctx) => {
    const address = value.replace(/^\[(.*)\](:\d+)?$/, '$1').replace(/^(\d+\.\d+\.\d+\.\d+):\d+$/, '$1');
    if (isIP(address) === 0)
      ctx.addIssue({
        code: 'custom',
        message: `${JSON.stringify(value)}: expected an IP address, optionally with :port`,
      });
  });

export const egressSchema = z
  .strictObject(
    {
      allow: z.array(egressRuleSchema, { error: 'expected a list of host patterns' }).default([]).meta({
        description:
          'Hosts the sandbox may reach through its proxy: exact names or "*.suffix" (names below suffix), ports 443 and 80 unless ":port" or ports: names others. IP addresses are never allowed by themselves.',
      }),
      deny: z.array(egressRuleSchema, { error: 'expected a list of host patterns' }).default([]).meta({
        description:
          'Checked before allow and wins over it; a rule\'s except: lists names it does not cover (deny "*.corp.example" except "mirror.corp.example").',
      }),
      privateRanges: z.array(cidrSchema, { error: 'expected a list of address ranges' }).default([]).meta({
        description:
          "Private, loopback or link-local ranges an allowed name may resolve to (an internal mirror on 10.x). Without them such answers are refused (DNS rebinding). The engine host's own addresses are refused always.",
      }),
      resolvers: z
        .array(resolverSchema, { error: 'expected a list of name server addresses' })
        .default([])
        .meta({
          description:
            "Name servers the proxy asks (default: the host's). The sandbox itself never gets one.",
        }),
      phases: z
        .array(z.enum(EGRESS_PHASES, { error: 'expected "agent", "baseline", "verify" or "build"' }), {
          error: 'expected a list of phases such as ["agent"]',
        })
        .default(['agent'])
        .meta({
          description:
            "Which sandboxes get egress: the agent's by default; the baseline's and the verification's only when listed (a verdict should not depend on the network). \"build\": the image build's steps reach the same names through a proxy of their own (instead of sandbox.build.network's whole network).",
        }),
    },
    { error: typeError('expected {allow: [hosts], deny: [hosts], privateRanges, resolvers, phases}') },
  )
  .meta({
    description:
      'Egress by host name through a proxy outside the sandbox, with every request logged. Absent: network none. Refused where the engine cannot enforce it (see `sandbox-harness doctor`).',
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

export const providerSchema = z.strictObject({
  name: z.enum(PROVIDER_NAMES, { error: 'expected one of "anthropic", "openai" or "replay"' }),
  model: nonEmpty('a model name').optional(),
});

export const catalogSchema = z
  .strictObject({
    name: z.string({ error: 'expected a service name' }).regex(/^[A-Za-z0-9][A-Za-z0-9._-]*$/, {
      error: 'expected a service name of letters, digits, ".", "_" or "-"',
    }),
    owner: nonEmpty('the owning team or person'),
    description: z.string({ error: 'expected a description' }).optional(),
    repo: nonEmpty('the path of the service repo, relative to this catalog file').meta({
      description: 'Path of the service repo, relative to this catalog file.',
    }),
    // Optional: a service without business rules yet still has a catalog.
    rules: z
      .record(z.string(), ruleSchema, {
        error: 'expected a mapping of rule name: {value, unit, source}',
      })
      .default({}),
    agent: agentSchema,
    sandbox: sandboxSchema.prefault({}),
    provider: providerSchema.optional(),
  })
  .meta({
    title: 'sandbox-harness service catalog',
    description: 'Business rules, editable files, test command and sandbox of one service.',
  });

export type Catalog = z.output<typeof catalogSchema>;
export type CatalogInput = z.input<typeof catalogSchema>;
export type Rule = z.output<typeof ruleSchema>;
export type TestLayer = z.output<typeof testLayerSchema>;
export type AgentConfig = z.output<typeof agentSchema>;
export type SandboxConfig = z.output<typeof sandboxSchema>;
export type BuildConfig = z.output<typeof buildSchema>;
export type SandboxTimeouts = z.output<typeof timeoutsSchema>;
export type ResourcesConfig = z.output<typeof resourcesSchema>;
export type ProviderConfig = z.output<typeof providerSchema>;
export type EgressConfig = z.output<typeof egressSchema>;
export type ProviderName = (typeof PROVIDER_NAMES)[number];

/** The test command as layers; a single command is one layer called `test`. */
export function testLayers(catalog: { agent: Pick<AgentConfig, 'testCommand'> }): TestLayer[] {
  const command = catalog.agent.testCommand;
  return typeof command === 'string' ? [{ name: 'test', command }] : command.map((layer) => ({ ...layer }));
}

const UNITS: Record<string, number> = { '': 1, k: 1024, m: 1024 ** 2, g: 1024 ** 3, t: 1024 ** 4 };

/** `"512m"`, `"1g"`, `"1.5GiB"` or a number of bytes, as bytes (binary units, like Docker). */
export function memoryBytes(value: string | number): number {
  if (typeof value === 'number') return value;
  const match = MEMORY.exec(value.trim());
  if (!match) throw new RangeError(`not a memory size: ${JSON.stringify(value)}`);
  const unit = UNITS[(match[2] ?? '').toLowerCase()] ?? 1;
  return Math.round(Number(match[1]) * unit);
}
