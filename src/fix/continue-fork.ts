/**
 * `fix --continue <run> --from-sandbox`: the first round of attempts starts from the earlier
 * run's kept attempt sandbox as it was (its files, installed dependencies, build output,
 * anything else it wrote), forked (`sandbox/fork/`), not only from its patch replayed onto
 * the repo. The fork's image lives as long as this run (then removed; `gc` removes one a
 * killed run left). Verification is untouched: pristine image plus exactly the gated change.
 *
 * The kept sandbox is the record's word: the backend refuses one that lacks this tool's
 * marks or belongs to another run, and one on another engine is refused here.
 */
import { ConfigError, errorMessage } from '../errors.js';
import { forkSandbox, forkedSandbox, ForkUnsupported, removeFork } from '../sandbox/fork/fork.js';
import type { Sandbox, SandboxSpec } from '../sandbox/types.js';
import type { Run } from './types.js';

/** Whether attempt `n` is in the run's first round (a continued run's first attempts). */
export function inFirstRound(run: Pick<Run, 'continuation' | 'laneProviders'>, n: number): boolean {
  const before = run.continuation?.attemptsBefore ?? 0;
  return n > before && n <= before + (run.laneProviders?.length ?? 1);
}

/** Forks the earlier run's kept sandbox onto `run.fork`; nothing without `--from-sandbox`. */
export async function forkKeptSandbox(run: Run): Promise<void> {
  if (!run.options.fromSandbox) return;
  const continued = run.continuation;
  const backend = run.deps.backend;
  if (!continued)
    throw new ConfigError("--from-sandbox needs --continue <run>: it forks that run's kept sandbox");
  if (!backend.forkImage) throw new ForkUnsupported(backend.name);
  const kept = continued.keptSandbox;
  if (!kept)
    throw new ConfigError(
      `run ${continued.runId} kept no sandbox of its last attempt, so there is no state to fork`,
      [],
      {
        hint: 'Continue from its patch (without --from-sandbox), or keep sandboxes with --keep on-failure|always.',
      },
    );
  if (kept.engine !== undefined && kept.engine !== backend.engine)
    throw new ConfigError(
      `run ${continued.runId} kept its sandbox on engine ${kept.engine}, not on ${backend.engine}`,
    );
  const request = { id: kept.id, runId: continued.runId };
  const source = await backend.attach(request);
  try {
    run.fork = await forkSandbox(backend, source, request, { owner: run.dir.id, signal: run.signal });
  } finally {
    // Stopped again as it was found: it stays the earlier run's evidence.
    await backend.release(request).catch(() => undefined);
  }
  run.journal.append({
    kind: 'fork',
    fork: {
      container: kept.id,
      image: run.fork.image,
      inherited: run.fork.inherited.length,
      durationMs: run.fork.durationMs,
    },
  });
}

/** The image a first-round attempt sandbox starts from when the run forked one. */
export function forkSpec(
  run: Pick<Run, 'fork' | 'continuation' | 'laneProviders'>,
  role: string,
  pristine: string,
): Partial<SandboxSpec> {
  const n = /^attempt-(\d+)$/.exec(role)?.[1];
  if (!run.fork || n === undefined || !inFirstRound(run, Number(n))) return {};
  return { image: run.fork.image, scanAgainst: pristine };
}

/** A sandbox made from the fork: its change scan includes what the fork carried. */
export function adoptFork(run: Pick<Run, 'fork'>, spec: SandboxSpec, sandbox: Sandbox): Sandbox {
  return run.fork && spec.image === run.fork.image
    ? forkedSandbox(sandbox, run.fork, spec.hidden ?? [])
    : sandbox;
}

/** Removes the fork's image at the run's end (kept sandboxes still using it keep it until gc). */
export async function dropFork(run: Run): Promise<void> {
  if (!run.fork) return;
  await removeFork(run.deps.backend, run.fork).catch((error: unknown) =>
    run.events.emit({
      kind: 'cleanup_failed',
      message: `fork image ${run.fork!.image}: ${errorMessage(error)}`,
    }),
  );
}
