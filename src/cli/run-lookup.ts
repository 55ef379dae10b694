/**
 * Finding what the run-reading commands (`runs`, `inspect`, `logs`, `export`, `apply`,
 * `shell`, `rerun-tests`, `gc --run`, `view`) work on: the folder of run records the flags
 * mean, the engine that holds a run's kept containers, and the kept sandbox of an attempt.
 * Commands import this inside their actions: it loads catalogs and engine clients.
 */
import { stat } from 'node:fs/promises';
import { resolve } from 'node:path';
import { findCatalogIfAny } from '../catalog/discover.js';
import { loadCatalog } from '../catalog/load.js';
import { HarnessError, UsageError } from '../errors.js';
import { runsDirFor, type RunRecord, type StoredRun } from '../runs/record.js';
import { attemptOfContainer } from '../runs/attempt-roles.js';
import {
  connectEngine,
  describeStoredEngine,
  resolveStoredEngine,
  sandboxProvider,
  type EngineSpec,
} from '../sandbox/backend-registry.js';
import type { AttachRequest, SandboxBackend } from '../sandbox/types.js';
import type { CliContext } from './cli-context.js';
import { enginesNamed, resolveEngineFlags, type EngineFlags } from './engine-flags.js';

/** `--repo`, `--catalog`, `--runs-dir` (see `withRunsLocation`). */
export interface RunsLocation {
  repo?: string;
  catalog?: string;
  runsDir?: string;
}

/** Where run records are: `--runs-dir`, else the repo of `--catalog`, else `--repo` or the working directory. */
export async function runsDirOf(ctx: CliContext, where: RunsLocation): Promise<string> {
  if (where.runsDir) return resolve(ctx.cwd, where.runsDir);
  if (where.catalog) return runsDirFor((await loadCatalog(where.catalog, { cwd: ctx.cwd })).repoDir);
  if (where.repo) return runsDirFor(resolve(ctx.cwd, where.repo));
  const here = runsDirFor(ctx.cwd);
  if (
    await stat(here).then(
      () => true,
      () => false,
    )
  )
    return here;
  // From a folder of catalogs, `fix` wrote into the service repo: look where it did. With
  // several catalogs there, which repo is meant is unknown: refused (exit 2), as `fix` does,
  // rather than "no runs" from a folder that was never the one.
  const catalog = await findCatalogIfAny(ctx.cwd);
  if (catalog) {
    const loaded = await loadCatalog(catalog, { cwd: ctx.cwd }).catch(() => undefined);
    if (loaded) return runsDirFor(loaded.repoDir);
  }
  return here;
}

/**
 * The backend that holds a run's containers: on the engine its record names. That engine is
 * found among the engines the user names (`--engines`/`--engine`), else by the reference the
 * record keeps (an engines file entry, a context, a URL: resolved with the user's own files
 * and keys), else it is the local engine. Containers there are still only used when they
 * carry the run's id (`SandboxBackend.attach`).
 */
export async function backendOfRun(
  ctx: CliContext,
  record: RunRecord,
  choice: EngineFlags,
): Promise<SandboxBackend> {
  const name = record.engine ?? 'local';
  let spec: EngineSpec | undefined;
  if (enginesNamed(choice)) {
    const specs = await resolveEngineFlags(ctx, choice);
    spec = specs.find((s) => s.name === name);
    if (!spec) {
      throw new UsageError(
        `run ${record.id} ran on engine ${name}, which is not among the engines named (${specs.map((s) => s.name).join(', ')})`,
        {
          hint: `Name that engine: the engines file that lists it as \`${name}\`, or --engine with its context or URL.`,
        },
      );
    }
  } else if (record.engineRef) {
    try {
      spec = await resolveStoredEngine(record.engineRef, { env: ctx.env });
    } catch (error) {
      if (!(error instanceof HarnessError)) throw error;
      throw new UsageError(
        `run ${record.id} ran on engine ${name}, which cannot be reached as its record says (${describeStoredEngine(record.engineRef)}): ${error.message}`,
        {
          hint: `Name the engine again: --engines FILE (listing it as \`${name}\`) or --engine CONTEXT-OR-URL.`,
        },
      );
    }
  } else if (name !== 'local') {
    throw new UsageError(
      `run ${record.id} ran on engine ${name}, and its record does not say how to reach it`,
      {
        hint: `Name the engine: --engines FILE (listing it as \`${name}\`) or --engine CONTEXT-OR-URL.`,
      },
    );
  }
  if (!spec) return (await sandboxProvider()).backend;
  return (await sandboxProvider('docker', { engine: await connectEngine({ ...spec, name }) })).backend;
}

/** The kept attempt sandbox of a run: of attempt `attempt` when given, else of the last attempt that kept one. */
export function keptAttemptSandbox(run: StoredRun, attempt: number | undefined): AttachRequest {
  const all = run.record.containers;
  const kept = all.filter((c) => c.kept && attemptOfContainer(c, all) !== undefined);
  let container;
  if (attempt !== undefined) {
    container = kept.find((c) => attemptOfContainer(c, all) === attempt);
    if (!container) {
      const have = kept.map((c) => attemptOfContainer(c, all)).join(', ') || 'none';
      throw new UsageError(
        `run ${run.record.id} kept no sandbox of attempt ${attempt} (kept attempts: ${have})`,
      );
    }
  } else {
    container = kept[kept.length - 1];
  }
  if (!container) {
    throw new UsageError(
      `run ${run.record.id} kept no container (outcome ${run.record.outcome}, keep policy ${run.record.keep})`,
      {
        hint: 'Containers are kept for failed runs by default; run `fix` again with --keep always to keep them for every run.',
      },
    );
  }
  return { id: container.id, runId: run.record.id };
}

const REMOVED = 'removed (sandbox-harness gc, or by hand)';

/** What inspect says of a kept container the engine no longer has. */
export function removedStatus(status: string): string {
  return status === 'removed' ? REMOVED : status;
}

/**
 * The kept container is still there, or a usage error that says it was removed: a container
 * `gc` took away is not the engine failing (exit 3), it is a request for what no longer is.
 */
export async function keptContainerPresent(
  backend: SandboxBackend,
  request: AttachRequest,
  run: StoredRun,
): Promise<void> {
  const state = await backend.state(request);
  if (state.exists) return;
  throw new UsageError(
    `container ${request.id.slice(0, 12)} of run ${run.record.id} was ${REMOVED}; there is nothing to open`,
    {
      hint: '`sandbox-harness inspect` still shows the record, patches and test output; `fix --keep always` keeps containers of every run.',
    },
  );
}
