/**
 * The catalog's setup (`sandbox.setup`): a command run once on the untouched repo, in a
 * sandbox of its own (network none) before the agent starts; that sandbox is forked
 * (`sandbox/fork/`) and the run's attempt sandboxes start from the fork. In an eval, a setup
 * the catalog marks `shared` is made once per task (per engine, image, catalog, runtime and
 * held-out set) and every trial starts from it.
 *
 * What the setup wrote is never part of the agent's change: an attempt sandbox's scan sees
 * its own writable layer only, compared with the pristine tree. Nor is it trusted for a
 * verdict: every verification (and the baseline) is the pristine image plus exactly the
 * change, where the setup runs again as the first layer (`verificationLayers`) before the
 * tests. A setup that fails on the untouched repo ends the run as a configuration error.
 */
import { ConfigError } from '../errors.js';
import { tail } from './test-layers.js';
import type { SandboxSpec } from '../sandbox/types.js';
import { SetupFailed, type SetupState } from './setup-states.js';
import type { Run } from './types.js';

/** The setup's output in the run folder when it failed. */
const SETUP_OUTPUT_FILE = 'setup-output.txt';
/** Output kept of the setup command (head and tail): enough to see why it failed. */
const SETUP_OUTPUT_BYTES = 1024 * 1024;

/**
 * Step 3b of `fix`: the catalog's setup, made or taken from the eval's shared ones, and
 * recorded; nothing without `sandbox.setup`. The attempt image (git, a CLI agent's layer)
 * must be final: the setup runs on top of it.
 */
export async function prepareSetup(run: Run, hidden: readonly string[]): Promise<void> {
  const setup = run.catalog.catalog.sandbox.setup;
  if (!setup) return;
  const backend = run.deps.backend;
  if (!backend.forkImage)
    throw new ConfigError(
      `the ${backend.name} backend cannot fork a sandbox, which catalog sandbox.setup needs (the agent's sandboxes start from the setup's result)`,
      [],
      { hint: 'Run on the docker backend, or move the setup into the sandbox image (sandbox.dockerfile).' },
    );
  const states = setup.shared && run.options.sharedSetups ? run.options.sharedSetups : run.ownSetups;
  const image = run.attemptImage.tag ?? run.record.image?.tag ?? '';
  // The run's image by id too: a tag (a prebuilt `sandbox.image`) may name another image later.
  const key = JSON.stringify([
    backend.engine,
    image,
    run.record.image?.id ?? null,
    run.catalog.hash,
    run.options.runtime ?? null,
    [...hidden].sort(),
  ]);
  run.journal.append({ kind: 'setup_start', command: setup.command });
  const { state, reused } = await states.get(key, () => runSetup(run, setup.command, hidden));
  run.setup = state;
  if (states === run.ownSetups) run.options.sharedSetups?.noteTrialOwn(state.image);
  run.journal.append({
    kind: 'setup',
    setup: {
      command: setup.command,
      image: state.image,
      durationMs: state.durationMs,
      shared: setup.shared,
      ...(reused ? { reusedFrom: state.madeBy } : {}),
    },
  });
}

/** The setup command in a fresh sandbox of the attempt image, then that sandbox forked. */
async function runSetup(run: Run, command: string, hidden: readonly string[]): Promise<SetupState> {
  const started = Date.now();
  const box = await run.sandboxes.create('setup', { hidden }, true);
  try {
    const result = await box.exec(command, {
      timeoutMs: run.catalog.catalog.sandbox.timeouts.testSec * 1000,
      maxOutputBytes: SETUP_OUTPUT_BYTES,
      signal: run.signal,
    });
    if (result.exitCode !== 0) {
      const output = `$ ${command}\n${result.stdout}${result.stderr}`;
      await run.dir.writeFile(SETUP_OUTPUT_FILE, output);
      throw new SetupFailed(
        `the catalog's setup command ${result.timedOut ? 'timed out' : `failed (exit ${result.exitCode})`} on the untouched repo: ${tail(`${result.stdout}${result.stderr}`, 600).trim() || '(no output)'}`,
        [],
        {
          hint: `Its whole output is in ${run.dir.path(SETUP_OUTPUT_FILE)}. Fix sandbox.setup.command in ${run.catalog.file}; \`sandbox-harness check\` runs it with the tests.`,
        },
      );
    }
    // Nothing the setup started may write while its state is taken.
    await box.freeze({ signal: run.signal });
    const fork = await run.deps.backend.forkImage!(
      { id: box.id, runId: run.dir.id },
      { owner: run.dir.id, signal: run.signal },
    );
    return {
      image: fork.image,
      imageId: fork.imageId,
      madeBy: run.dir.id,
      durationMs: Date.now() - started,
      backend: run.deps.backend,
    };
  } finally {
    await run.sandboxes.release(box);
  }
}

/** The image an attempt sandbox starts from when the run has a setup (its scan: the pristine tree's). */
export function setupSpec(run: Pick<Run, 'setup'>, role: string, pristine: string): Partial<SandboxSpec> {
  if (!run.setup || !/^attempt-\d+$/.test(role)) return {};
  return { image: run.setup.image, scanAgainst: pristine };
}

/** Removes the run's own setup images at its end (an eval's shared ones go at the eval's end). */
export async function dropSetup(run: Run): Promise<void> {
  for (const failure of await run.ownSetups.drain())
    run.events.emit({ kind: 'cleanup_failed', message: `setup image ${failure.image}: ${failure.message}` });
}
