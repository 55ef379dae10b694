/**
 * The catalog's `agent:` section: what the agent may edit, how its change is tested (one
 * command or layers; a report; a reward, steps: `reward-schema.ts`), what is not its change,
 * and the budgets, review, docs and skills of its run.
 */
import { z } from 'zod';
import { priceTableSchema } from '../llm/cost.js';
// The providers the registry knows by name: one list, so the catalog accepts exactly those.
import { PROVIDER_NAMES } from '../llm/provider-registry.js';
import { TEST_LOG_FORMATS } from '../outcomes.js';
import { glob, int, nonEmpty, repoRelativePath, typeError } from './field-checks.js';
import { DEFAULT_IGNORED_NAMES } from './ignore-defaults.js';
import { mcpServersSchema } from './mcp-schema.js';
import { rewardSchema, stepsSchema, verifierFilesSchema } from './reward-schema.js';

export const DEFAULT_MAX_ATTEMPTS = 3;
export const DEFAULT_MAX_TURNS = 30;

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

/** The agent kinds a catalog may name (src/agent-kinds/kind-registry.ts has what each is). */
export const AGENT_KINDS_IN_CATALOG = [
  'builtin',
  'claude-code',
  'codex',
  'command',
  'gemini',
  'opencode',
] as const;

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
  parallelAttempts: int(1, 8).optional().meta({
    description:
      'Attempts run at once from the same state (`fix --parallel`): the first verified (with review, approved) one wins, the others are stopped and their sandboxes removed. Each round of attempts counts as one of maxAttempts. Default 1.',
  }),
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
        format: z
          .enum(['junit', ...TEST_LOG_FORMATS], {
            error: `expected "junit" (a report file) or the runner whose output is read: ${TEST_LOG_FORMATS.map((f) => `"${f}"`).join(', ')}`,
          })
          .meta({
            description:
              "Where per-test results come from: `junit`, a JUnit XML report file the test command writes (vitest, jest, mocha, node:test and pytest write one); or the console output of a runner, for repos that write no report: `pytest` (run it with `-rA`, or `-v`), `unittest` (verbose: `-v`, Django's `-v 2`), `vitest` (`--reporter=verbose`), `jest` (`--verbose`), `mocha` (the spec reporter). Output is read as hostile data: a test seen failing anywhere in it did not pass, and output that shows no failure from a command that exited non-zero is not believed.",
          }),
        path: repoRelativePath
          .meta({
            description:
              'With format junit: where the test command writes the report, relative to the workspace. Removed before the tests run; read back (bounded, no symlink) after, as hostile data.',
          })
          .optional(),
        failToPass: z.array(nonEmpty('a test id'), { error: 'expected a list of test ids' }).optional().meta({
          description:
            "Tests that must pass (SWE-bench FAIL_TO_PASS). With failToPass or passToPass set, a verification passes only when every named test passed in the report (skipped or missing is not passed); the test command's exit code is recorded next to it. Ids: `file > suite > name`, pytest's `file::Class::name`, unittest's `name (module.Class)` or `module.Class.name`.",
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
      { error: typeError('expected {format: junit, path: "reports/junit.xml"} or {format: pytest}') },
    )
    .superRefine((report, ctx) => {
      if (report.format === 'junit' && report.path === undefined)
        ctx.addIssue({
          code: 'custom',
          path: ['path'],
          message: 'expected the workspace-relative path the test command writes its JUnit report to',
        });
      if (report.format !== 'junit' && report.path !== undefined)
        ctx.addIssue({
          code: 'custom',
          path: ['path'],
          message: `format ${report.format} reads the test command's output, not a file; remove path (or use format junit)`,
        });
    })
    .optional()
    .meta({
      description:
        "Per-test results: a report file the test command writes in the sandbox, or the runner's own output, shown in the run record, inspect, the viewer and eval reports.",
    }),
  reward: rewardSchema.optional(),
  verifierFiles: verifierFilesSchema.optional(),
  steps: stepsSchema.optional(),
  kind: z
    .enum(AGENT_KINDS_IN_CATALOG, { error: `expected one of ${AGENT_KINDS_IN_CATALOG.join(', ')}` })
    .default('builtin')
    .meta({
      description:
        "Which agent works the ticket: `builtin` (the harness's loop), or a CLI that runs in the sandbox and reaches its model only through the host's model bridge: `claude-code`, `codex`, or `command` (agent.command). `--agent` overrides it.",
    }),
  command: nonEmpty('a shell command line').optional().meta({
    description:
      'For kind `command`: the program to run in the sandbox (as the sandbox user, in /workspace). It gets the task in $SANDBOX_HARNESS_TASK, the model in $SANDBOX_HARNESS_MODEL and the bridge as ANTHROPIC_BASE_URL / OPENAI_BASE_URL with placeholder keys.',
  }),
  mcpServers: mcpServersSchema.optional(),
});
