/**
 * Harbor's multi-step tasks (`[[steps]]` in task.toml): an ordered list of instructions the
 * agent works through in ONE environment, each step with its own `steps/<name>/instruction.md`,
 * its own tests (`steps/<name>/tests/`, laid over the task's `tests/`, same-named files the
 * step's) and optionally its own `solution/solve.sh` for the oracle. The trial's reward is the
 * steps' mean (per name, over the steps whose verifier left one) or the last step's
 * (`multi_step_reward_strategy`), and a step below its `min_reward` stops the steps after it.
 *
 * Here a task's steps become catalog `agent.steps` (run by `src/fix/steps.ts`): each step's
 * change so far is verified in a fresh sandbox from the pristine image, as every change is.
 * What Harbor does and this cannot honour is refused by name: a step's `workdir/` (files and
 * a setup.sh run before its agent), and any other step key (healthcheck, user, a separate
 * verifier environment) as an unknown key.
 */
import { lstat } from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';

export const STEP_LIMITS = { steps: 100 } as const;

const STEP_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;
const REWARD_NAME = /^[A-Za-z_][A-Za-z0-9_.-]{0,63}$/;

const threshold = z
  .number({ error: 'expected a number' })
  .min(-1e9, { error: 'expected a number from -1e9 to 1e9' })
  .max(1e9, { error: 'expected a number from -1e9 to 1e9' });

/** The step tables' phase settings this can honour (a step's time; its verifier's variables). */
export function stepTomlSchema(fields: {
  seconds: z.ZodType<number>;
  envMap: z.ZodType<Record<string, string>>;
}) {
  return z.strictObject(
    {
      name: z.string({ error: 'expected a step name' }).regex(STEP_NAME, {
        error: 'expected a step name of letters, digits, ".", "_" or "-" (at most 128)',
      }),
      min_reward: z
        .union(
          [
            threshold,
            z.record(
              z.string().regex(REWARD_NAME, { error: 'expected a reward name such as "reward"' }),
              threshold,
            ),
          ],
          { error: 'expected a number, or a table of reward name = number' },
        )
        .optional(),
      agent: z
        .strictObject({ timeout_sec: fields.seconds.optional() }, { error: 'expected a table' })
        .optional(),
      verifier: z
        .strictObject(
          { timeout_sec: fields.seconds.optional(), env: fields.envMap.optional() },
          { error: 'expected a table' },
        )
        .optional(),
    },
    { error: 'expected a table such as [[steps]] name = "first"' },
  );
}

/** `steps` of task.toml: at least one, names unique. */
export function stepsTomlSchema(step: ReturnType<typeof stepTomlSchema>) {
  return z
    .array(step, { error: 'expected [[steps]] tables' })
    .min(1, { error: 'expected at least one [[steps]] table' })
    .max(STEP_LIMITS.steps, { error: `expected at most ${STEP_LIMITS.steps} steps` })
    .superRefine((steps, ctx) => {
      const seen = new Set<string>();
      for (const [i, s] of steps.entries()) {
        if (seen.has(s.name))
          ctx.addIssue({ code: 'custom', path: [i, 'name'], message: `step name "${s.name}" is used twice` });
        seen.add(s.name);
      }
    });
}

export const MULTI_STEP_STRATEGIES = ['mean', 'final'] as const;

/** One step's folder, read. */
export interface HarborStep {
  name: string;
  instruction: string;
  /** Absolute; absent when the step has no tests/ of its own (the task's serve). */
  testsDir?: string;
  /** Absolute; absent when the step has no `solution/solve.sh`. */
  solutionDir?: string;
}

/** How a task file is read (harbor.ts's bounded, link-refusing reader). */
export type ReadTaskFile = (dir: string, rel: string, max: number) => Promise<string | { problem: string }>;

type Kind = 'folder' | 'link' | 'missing' | 'other';

async function kindOf(p: string): Promise<Kind> {
  const st = await lstat(p).catch(() => undefined);
  if (!st) return 'missing';
  if (st.isSymbolicLink()) return 'link';
  return st.isDirectory() ? 'folder' : 'other';
}

/**
 * Each step's folder `steps/<name>/`: its instruction (required), its tests (optional, but
 * some test.sh must be there: the step's or the task's), its solution (optional); a
 * `workdir/` is refused. Every problem at its path.
 */
export async function loadHarborSteps(
  dir: string,
  display: string,
  names: readonly string[],
  taskHasTestSh: boolean,
  read: ReadTaskFile,
  instructionBytes: number,
): Promise<{ steps: HarborStep[] } | { problems: string[] }> {
  const problems: string[] = [];
  const steps: HarborStep[] = [];
  const stepsKind = await kindOf(path.join(dir, 'steps'));
  if (stepsKind !== 'folder')
    return {
      problems: [
        `${path.join(display, 'steps')}: ${stepsKind === 'link' ? 'a symlink; refused' : 'missing (expected steps/<name>/instruction.md for each [[steps]] table)'}`,
      ],
    };
  for (const name of names) {
    const rel = `steps/${name}`;
    const at = (sub: string) => path.join(display, rel, sub);
    const kind = await kindOf(path.join(dir, rel));
    if (kind !== 'folder') {
      problems.push(
        `${path.join(display, rel)}: ${kind === 'link' ? 'a symlink; refused' : 'missing (the folder of [[steps]] name = ' + JSON.stringify(name) + ')'}`,
      );
      continue;
    }
    const instruction = await read(dir, `${rel}/instruction.md`, instructionBytes);
    if (typeof instruction !== 'string') problems.push(`${at('instruction.md')}: ${instruction.problem}`);
    else if (instruction.trim() === '') problems.push(`${at('instruction.md')}: the instruction is empty`);
    if ((await kindOf(path.join(dir, rel, 'workdir'))) !== 'missing')
      problems.push(
        `${at('workdir')}: a step's workdir/ (files and setup.sh placed before its agent) is not supported by sandbox-harness`,
      );
    const testsKind = await kindOf(path.join(dir, rel, 'tests'));
    if (testsKind === 'link' || testsKind === 'other') problems.push(`${at('tests')}: not a folder; refused`);
    let stepTestSh = false;
    if (testsKind === 'folder') {
      const testSh = await read(dir, `${rel}/tests/test.sh`, instructionBytes);
      if (typeof testSh === 'string') stepTestSh = true;
      else if (testSh.problem !== 'missing') problems.push(`${at('tests/test.sh')}: ${testSh.problem}`);
    }
    if (!stepTestSh && !taskHasTestSh && testsKind !== 'link')
      problems.push(`${at('tests/test.sh')}: missing, and the task has no tests/test.sh for it either`);
    const solutionDir = path.join(dir, rel, 'solution');
    const hasSolution =
      (await kindOf(solutionDir)) === 'folder' &&
      (await lstat(path.join(solutionDir, 'solve.sh')).catch(() => undefined))?.isFile() === true;
    if (typeof instruction === 'string')
      steps.push({
        name,
        instruction,
        ...(testsKind === 'folder' ? { testsDir: path.join(dir, rel, 'tests') } : {}),
        ...(hasSolution ? { solutionDir } : {}),
      });
  }
  return problems.length > 0 ? { problems } : { steps };
}
