/**
 * The catalog's reward and steps (`agent.reward`, `agent.verifierFiles`, `agent.steps`): a
 * verifier that leaves a score instead of an exit code (Harbor's tests/test.sh), the files
 * only verification sandboxes get, and a task of several instructions given one after the
 * other in one sandbox, each with its own verifier (Harbor's `[[steps]]`).
 */
import { z } from 'zod';
import { nonEmpty, repoRelativePath, typeError } from './field-checks.js';

/** What an unchanged workspace gets: the verifier runs on it (Harbor's rule), or it scores 0 unverified. */
export const UNCHANGED_RULES = ['verify', 'scores-zero'] as const;
/** How a multi-step task's reward is formed from its steps' (Harbor's `multi_step_reward_strategy`). */
export const STEP_REWARD_STRATEGIES = ['mean', 'final'] as const;

export const rewardSchema = z
  .strictObject(
    {
      dir: repoRelativePath.meta({
        description:
          'Workspace folder where the test command leaves reward.json (named numbers, the score under "reward") or reward.txt (one number); reward.json is read first, as Harbor does. Removed before the tests run; read back (bounded, no symlink) after, as hostile data.',
      }),
      unchanged: z
        .enum(UNCHANGED_RULES, { error: 'expected "verify" or "scores-zero"' })
        .default('verify')
        .meta({
          description:
            "What an attempt that changed nothing gets: `verify` (default, Harbor's rule): the verifier runs on the untouched workspace and its reward counts, so an untouched environment that passes half the tests scores 0.5, and the baseline passing never ends the run; `scores-zero`: no verification, the attempt ends `no-changes` and scores 0.",
        }),
      combine: z.enum(STEP_REWARD_STRATEGIES, { error: 'expected "mean" or "final"' }).default('mean').meta({
        description:
          "With `agent.steps`: the attempt's reward from its steps': `mean` (default), name by name over the steps whose verifier left a reward; `final`, the last step's.",
      }),
    },
    { error: typeError('expected {dir: ".harbor-verifier"}') },
  )
  .meta({
    description:
      "A reward instead of the exit code decides verification (Harbor's verifier): the change is verified when the score is at least 1; the score is recorded with the attempt and the eval trial.",
  });

export const verifierFilesSchema = z
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
  .meta({
    description:
      "Files only the baseline and the verification sandboxes get (Harbor's tests/): never in an agent's sandbox, so the agent cannot read or change them.",
  });

const seconds = z
  .number({ error: 'expected a number of seconds greater than 0' })
  .positive({ error: 'expected a number of seconds greater than 0' })
  .max(7 * 24 * 3600, { error: 'expected at most a week of seconds' });

const rewardName = z
  .string()
  .regex(/^[A-Za-z_][A-Za-z0-9_.-]{0,63}$/, { error: 'expected a reward name such as "reward"' });
const threshold = z
  .number({ error: 'expected a number' })
  .min(-1e9, { error: 'expected a number from -1e9 to 1e9' })
  .max(1e9, { error: 'expected a number from -1e9 to 1e9' });

export const stepSchema = z.strictObject(
  {
    name: z.string({ error: 'expected a step name' }).regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/, {
      error: 'expected a step name of letters, digits, ".", "_" or "-" (at most 128)',
    }),
    ticket: nonEmpty('a ticket file, relative to this catalog file').meta({
      description: "The step's instruction: a ticket file (relative to this catalog file).",
    }),
    testCommand: nonEmpty('a shell command').meta({
      description: "The step's verification command (it leaves the reward in `agent.reward.dir`).",
    }),
    verifierFiles: verifierFilesSchema.optional(),
    attemptSec: seconds.optional().meta({
      description: "The agent's time for this step (default: sandbox.timeouts.attemptSec).",
    }),
    testSec: seconds.optional().meta({
      description: "The step verification's time (default: sandbox.timeouts.testSec).",
    }),
    minReward: z
      .union([threshold, z.record(rewardName, threshold)], {
        error: 'expected a number, or a table of reward name = number',
      })
      .optional()
      .meta({
        description:
          "Harbor's min_reward: below it (a number gates the score `reward`, a table each name it lists; a missing name or no reward is below), the steps after this one do not run.",
      }),
  },
  { error: typeError('expected {name, ticket, testCommand}') },
);

export const stepsSchema = z
  .array(stepSchema, { error: 'expected a list of steps' })
  .min(1, { error: 'expected at least one step' })
  .max(100, { error: 'expected at most 100 steps' })
  .superRefine((steps, ctx) => {
    const seen = new Set<string>();
    for (const [i, step] of steps.entries()) {
      if (seen.has(step.name))
        ctx.addIssue({
          code: 'custom',
          path: [i, 'name'],
          message: `step name "${step.name}" is used twice`,
        });
      seen.add(step.name);
    }
  })
  .meta({
    description:
      "Instructions given one after the other to the agent in ONE attempt sandbox (Harbor's [[steps]]): after each, the agent's whole change so far is verified in a fresh sandbox from the pristine image with that step's test command and verifier files, and its reward recorded; the attempt's reward is `agent.reward.combine` of the steps'. Needs `agent.reward`.",
  });

export type StepConfig = z.output<typeof stepSchema>;
export type RewardConfig = z.output<typeof rewardSchema>;
