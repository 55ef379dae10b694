/**
 * Parallel attempts (`fix --parallel N`, catalog `agent.parallelAttempts`): a round of N
 * attempts at once from the same state (the attempt image, or the fork `--from-sandbox`
 * made), each in its own sandbox with its own model conversation (its lane). The first one
 * verified (and, with review, approved) wins; the others are stopped, their sandboxes
 * removed, and the record says which attempt stopped them (`stoppedBy`). A round where none
 * wins hands the next round the feedback of its lowest-numbered attempt that has some.
 *
 * Verification is untouched: each attempt's change is gated and verified in a fresh sandbox
 * from the pristine image plus exactly that change, as a single attempt's is.
 */
import { resolve } from 'node:path';
import { ConfigError, HarnessError, Interrupted, errorMessage } from '../errors.js';
import type { LoadedCatalog } from '../catalog/load.js';
import type { ModelProvider } from '../llm/types.js';
import { runAttempt, type AttemptPlan, type AttemptResult } from './attempt.js';
import type { FixOptions, Run } from './types.js';

/** Most attempts at once (each is a sandbox and a model conversation). */
export const MAX_PARALLEL = 8;

/** How many attempts run at once: the flag, else the catalog, else one. */
export function laneCount(options: Pick<FixOptions, 'parallel'>, catalog: LoadedCatalog): number {
  return options.parallel ?? catalog.catalog.agent.parallelAttempts ?? 1;
}

/**
 * Each lane's model provider: lane 1 is the run's own; the others are made like it, each
 * in a session of its own, so a replay gives every lane its own player (of its own
 * cassette with `laneCassettes`) and no lane takes another's turns.
 */
export async function laneProviders(
  lanes: number,
  options: Pick<FixOptions, 'record' | 'laneCassettes' | 'cwd'>,
  first: ModelProvider,
  make: (cassette: string | undefined) => Promise<ModelProvider>,
  agent: { cli?: unknown },
): Promise<ModelProvider[] | undefined> {
  const cassettes = options.laneCassettes ?? [];
  if (cassettes.length > 1 && cassettes.length !== lanes)
    throw new ConfigError(
      `${cassettes.length} cassettes for ${lanes} parallel attempts: give one cassette, or one per attempt`,
    );
  if (lanes <= 1) return undefined;
  if (options.record !== undefined)
    throw new ConfigError(
      '--record cannot record parallel attempts (their turns interleave); use --parallel 1',
    );
  if (agent.cli)
    throw new ConfigError('parallel attempts run the builtin agent only; use --parallel 1 with a CLI agent');
  const providers = [first];
  for (let lane = 2; lane <= lanes; lane++) {
    const cassette = cassettes[lane - 1];
    providers.push(await make(cassette === undefined ? undefined : resolve(options.cwd, cassette)));
  }
  return providers;
}

/** Why a lane was stopped: another attempt of its round won. */
export class AttemptStopped extends Interrupted {
  constructor(readonly winner: number) {
    super(`stopped: attempt ${winner} passed first`);
  }
}

/** The roles of attempt `n`'s sandboxes: its own, its verifications (steps' too), its review. */
function ofAttempt(role: string, n: number): boolean {
  return (
    role === `attempt-${n}` ||
    role === `verify-${n}` ||
    role.startsWith(`verify-${n}-`) ||
    role === `review-${n}`
  );
}

type LaneEnd =
  { n: number; result: AttemptResult } | { n: number; stopped: true } | { n: number; error: unknown };

/**
 * One round: attempts `first` .. `first + lanes - 1` at once. Resolves with the winner's
 * result as soon as one passes (after the others have stopped and their sandboxes are gone),
 * or with the round's feedback-bearing result when none does. Throws the first error of an
 * attempt that was not stopped, when no attempt passed.
 */
export async function parallelRound(
  run: Run,
  plan: AttemptPlan,
  first: number,
  lanes: number,
  feedback: string | undefined,
  signal: AbortSignal,
  ready?: Promise<void>,
): Promise<AttemptResult> {
  const providers = run.laneProviders ?? [run.provider];
  const controllers = Array.from({ length: lanes }, () => new AbortController());
  let winner: number | undefined;
  const lane = async (index: number): Promise<LaneEnd> => {
    const n = first + index;
    const own = controllers[index]!;
    // The lane's view of the run: its own model; everything else (journal, sandboxes, costs) shared.
    const laneRun: Run = { ...run, provider: providers[index] ?? run.provider };
    try {
      const result = await runAttempt(
        laneRun,
        plan,
        n,
        feedback,
        AbortSignal.any([signal, own.signal]),
        ready,
      );
      if (result.verdict === 'passed' && winner === undefined) {
        winner = n;
        controllers.forEach((c, i) => i !== index && c.abort(new AttemptStopped(n)));
      }
      return { n, result };
    } catch (error) {
      if (own.signal.aborted && !signal.aborted && own.signal.reason instanceof AttemptStopped)
        return { n, stopped: true };
      return { n, error };
    }
  };
  const ends = await Promise.all(Array.from({ length: lanes }, (_, i) => lane(i)));
  for (const end of ends) {
    if (!('stopped' in end)) continue;
    run.journal.append({ kind: 'attempt_stopped', attempt: end.n, winner: winner! });
    // A stopped attempt is no evidence of anything: its sandbox goes now, whatever the keep policy.
    await run.sandboxes
      .discard((role) => ofAttempt(role, end.n))
      .catch((error: unknown) =>
        run.events.emit({ kind: 'cleanup_failed', message: `attempt-${end.n}: ${errorMessage(error)}` }),
      );
  }
  await run.journal.save();
  const won = ends.find((e) => 'result' in e && e.n === winner);
  if (won && 'result' in won) return won.result;
  const failure = ends.find((e) => 'error' in e);
  if (failure && 'error' in failure) throw failure.error;
  const results = ends.flatMap((e) => ('result' in e ? [e.result] : []));
  const taught = results.find((r) => r.feedback !== undefined);
  const last = results[results.length - 1];
  if (!last)
    throw new HarnessError('INTERNAL', 'internal', 'a round of parallel attempts ended without a result');
  return taught ? { ...last, feedback: taught.feedback! } : last;
}
