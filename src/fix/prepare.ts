/**
 * Step 1 of `fix`: everything that can be checked before anything is written: the catalog,
 * the ticket, the model provider, the engine. A bad input here leaves no trace. Last, an
 * apply to the repo that a crash interrupted is undone.
 */
import { laneCount, laneProviders } from './parallel-attempts.js';
import { resolve } from 'node:path';
import { recoverInterruptedApply } from '../changes/apply-change-set.js';
import { defaultJournalDir } from '../changes/apply-journal.js';
import { loadCatalog } from '../catalog/load.js';
import { loadTicket } from '../catalog/ticket.js';
import type { EventSink } from '../agent/events.js';
import { chooseProvider, createProvider, ProviderSession } from '../llm/provider-registry.js';
import type { RetryInfo } from '../llm/retry.js';
import { CostMeter, defaultPrices } from '../llm/cost.js';
import type { ModelProvider } from '../llm/types.js';
import type { FixDeps, FixOptions, Prepared } from './types.js';
import { loadContinuation } from './continue.js';
import { loadSeed } from './seed.js';
import { bridgedProvider, chooseAgent } from './agent-choice.js';
import { runsDirFor } from '../runs/record.js';
import { ConfigError } from '../errors.js';
import { formatDuration } from '../format.js';
import type { EgressConfig } from '../catalog/schema.js';

/** A catalog's egress that this engine cannot enforce stops the run before anything is made. */
async function refuseUnenforceableEgress(
  egress: EgressConfig | undefined,
  deps: FixDeps,
  file: string,
): Promise<void> {
  if (!egress) return;
  const problem = deps.backend.egressProblem
    ? await deps.backend.egressProblem()
    : `the ${deps.backend.name} backend cannot enforce egress`;
  if (problem) {
    throw new ConfigError(`${file}: sandbox.egress cannot be enforced here: ${problem}`, [], {
      hint: 'Run where `sandbox-harness doctor` says egress can be enforced, or remove sandbox.egress (the sandbox then has no network). It never falls back to more network.',
    });
  }
}

export async function prepare(options: FixOptions, deps: FixDeps): Promise<Prepared> {
  const catalog = await loadCatalog(options.catalogFile, { cwd: options.cwd });
  const repoDir = options.repoDir ? resolve(options.cwd, options.repoDir) : catalog.repoDir;
  const ticket = await loadTicket(options.ticket, {
    catalogDir: catalog.dir,
    repoDir,
    readStdin: options.readStdin,
    cwd: options.cwd,
  });
  const choice = chooseProvider({
    flagProvider: options.provider ?? (options.cassette ? 'replay' : undefined),
    flagModel: options.model,
    env: options.env,
    catalogProvider: catalog.catalog.provider?.name,
    catalogModel: catalog.catalog.provider?.model,
  });
  const make = deps.createProvider ?? createProvider;
  // The event log does not exist yet; retries are reported to it once it does.
  const retries: { sink?: EventSink } = {};
  // One session for every role: they replay their own queues of one cassette and record into one.
  const session = new ProviderSession({ record: options.record !== undefined });
  const shared = {
    session,
    onRetry: (info: RetryInfo) =>
      retries.sink?.emit({
        kind: 'model_retry',
        message: `try ${info.attempt} failed (${info.error.message}); retrying in ${formatDuration(info.delayMs)}`,
        durationMs: info.delayMs,
      }),
    ...(options.cassette ? { cassette: resolve(options.cwd, options.cassette) } : {}),
    env: options.env,
  };
  // Every role's calls are priced as they are answered; a limit stops the next call.
  const costs = new CostMeter(
    { ...defaultPrices(), ...catalog.catalog.agent.prices },
    options.costLimitUsd ?? catalog.catalog.agent.costLimit,
  );
  const agent = await chooseAgent({
    agent: options.agent,
    catalog,
    choice,
    cassette: options.cassette,
    env: options.env,
    cwd: options.cwd,
  });
  const maker = { ...shared, name: choice.name, ...(choice.model ? { model: choice.model } : {}) };
  // A CLI agent's calls go through the model bridge (and are metered there): no client here.
  const provider: ModelProvider = agent.cli
    ? bridgedProvider(choice.name, agent.cli.model)
    : costs.meter(await make({ ...maker, role: 'main' }), 'main');
  // Parallel attempts: every lane its own conversation (a replay: its own player, or cassette).
  const lanes = await laneProviders(
    laneCount(options, catalog),
    options,
    provider,
    async (cassette) =>
      costs.meter(
        await make({
          ...maker,
          role: 'main',
          session: new ProviderSession(),
          ...(cassette ? { cassette } : {}),
        }),
        'main',
      ),
    agent,
  );
  const delegateProvider =
    !agent.cli && catalog.catalog.agent.delegate
      ? costs.meter(await make({ ...maker, role: 'delegate' }), 'delegate')
      : undefined;
  // The checker may be another provider or model; by default it is the maker's, in a fresh context.
  const review: { provider?: string | undefined; model?: string | undefined } | undefined =
    catalog.catalog.agent.review ?? (options.review ? {} : undefined);
  const checkerName = review?.provider ?? choice.name;
  const checkerModel = review?.model ?? (checkerName === choice.name ? choice.model : undefined);
  const checker = review
    ? costs.meter(
        await make({
          ...shared,
          role: 'checker',
          name: checkerName,
          ...(checkerModel ? { model: checkerModel } : {}),
        }),
        'checker',
      )
    : undefined;
  // Before anything is written: an earlier run whose patch no longer applies is refused here.
  const continuation = options.seedRun
    ? await loadSeed(options.seedRun, repoDir)
    : options.continueFrom
      ? await loadContinuation(options.runsDir ?? runsDirFor(repoDir), options.continueFrom, repoDir)
      : undefined;
  // The engine answers (and has room) before the run record is written.
  await deps.ping();
  // A runtime the engine lacks is the configuration's error, found before anything is built.
  const asked = options.runtime ?? catalog.catalog.sandbox.runtime;
  const runtime = deps.runtime
    ? { ...(asked ? { asked } : {}), name: await deps.runtime(asked) }
    : asked
      ? { asked, name: asked }
      : undefined;
  await refuseUnenforceableEgress(catalog.catalog.sandbox.egress, deps, catalog.displayPath);
  // A crash mid-apply left the repo half written: put it back before an image is built from it.
  const recovered = await recoverInterruptedApply(repoDir, { journalDir: defaultJournalDir(options.env) });
  return {
    ...(recovered ? { recovered } : {}),
    ...(runtime ? { runtime } : {}),
    catalog,
    repoDir,
    ticket,
    provider,
    ...(lanes ? { laneProviders: lanes } : {}),
    agent,
    ...(delegateProvider ? { delegateProvider } : {}),
    ...(checker ? { checker } : {}),
    ...(session.recorder ? { recorder: session.recorder } : {}),
    retries,
    costs,
    ...(continuation ? { continuation } : {}),
  };
}
