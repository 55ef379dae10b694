/**
 * Step 1 of `fix`: everything that can be checked before anything is written: the catalog,
 * the ticket, the model provider, the engine. A bad input here leaves no trace.
 */
import { resolve } from 'node:path';
import { loadCatalog } from '../catalog/load.js';
import { loadTicket } from '../catalog/ticket.js';
import type { EventSink } from '../agent/events.js';
import { chooseProvider, createProvider } from '../llm/registry.js';
import { RecordingProvider } from '../llm/recording.js';
import type { ModelProvider } from '../llm/types.js';
import type { FixDeps, FixOptions, Prepared } from './context.js';

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
  let provider: ModelProvider = await make({
    onRetry: (info) =>
      retries.sink?.emit({
        kind: 'model_retry',
        message: `try ${info.attempt} failed (${info.error.message}); retrying in ${info.delayMs} ms`,
        durationMs: info.delayMs,
      }),
    name: choice.name,
    ...(choice.model ? { model: choice.model } : {}),
    ...(options.cassette ? { cassette: resolve(options.cwd, options.cassette) } : {}),
    env: options.env,
  });
  let recorder: RecordingProvider | undefined;
  if (options.record) {
    recorder = new RecordingProvider(provider);
    provider = recorder;
  }
  await deps.ping();
  return { catalog, repoDir, ticket, provider, ...(recorder ? { recorder } : {}), retries };
}
