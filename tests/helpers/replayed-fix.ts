/**
 * Whole `fix` runs on real Docker with replayed models: a cassette written from turns, the
 * run itself (its run id and image noted for the clean-up), what the engine still holds of
 * a run, and the clean-up of everything the runs left.
 */
import { rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { runFix, type FixOptions, type FixResult } from '../../src/fix/run-fix.js';
import { fixDeps } from '../../src/fix/deps.js';
import { sandboxProvider } from '../../src/sandbox/backend-registry.js';
import { dockerEngine } from '../../src/sandbox/docker/engine/index.js';
import { LABEL } from '../../src/sandbox/docker/labels.js';
import type { AssistantContent } from '../../src/llm/types.js';

/** A cassette of `turns` in `root`; a turn with a tool call stops for it. */
export async function cassette(root: string, name: string, turns: AssistantContent[][]): Promise<string> {
  const file = join(root, `${name}.json`);
  await writeFile(
    file,
    JSON.stringify({
      version: 1,
      model: name,
      turns: turns.map((content) => ({
        content,
        stopReason: content.some((b) => b.type === 'tool_use') ? 'tool_use' : 'end_turn',
      })),
    }),
  );
  return file;
}

/** What a test's runs made: removed by `cleanUp`. */
export interface ReplayedRuns {
  roots: string[];
  runIds: string[];
  images: Set<string>;
}

export function replayedRuns(): ReplayedRuns {
  return { roots: [], runIds: [], images: new Set() };
}

/** One `fix` run of `ticket` with the replay provider, never applied, nothing kept unless asked. */
export async function replayedFix(
  runs: ReplayedRuns,
  root: string,
  catalog: string,
  ticket: string,
  options: Partial<FixOptions>,
): Promise<FixResult> {
  const result = await runFix(
    {
      ticket,
      catalogFile: catalog,
      keep: 'never',
      apply: false,
      force: false,
      rebuild: false,
      cwd: root,
      env: { XDG_STATE_HOME: join(root, 'state') },
      signal: new AbortController().signal,
      readStdin: async () => '',
      provider: 'replay',
      ...options,
    },
    fixDeps(await sandboxProvider()),
  );
  runs.runIds.push(result.runId);
  if (result.record.image) runs.images.add(result.record.image.tag);
  return result;
}

/** What the engine still holds of a run: its containers, and its fork images. */
export async function leftOf(runId: string) {
  const engine = dockerEngine();
  return {
    containers: await engine.containers.list({ [LABEL.run]: runId }),
    forks: await engine.images.list({ [LABEL.run]: runId, [LABEL.kind]: 'fork' }),
  };
}

/** Removes whatever the runs left (containers, fork images, repo images) and their folders. */
export async function cleanUp(runs: ReplayedRuns): Promise<void> {
  const engine = dockerEngine();
  for (const id of runs.runIds) {
    for (const c of await engine.containers.list({ [LABEL.run]: id })) await engine.containers.remove(c.id);
    for (const i of await engine.images.list({ [LABEL.run]: id, [LABEL.kind]: 'fork' }))
      await engine.images.remove(i.id);
  }
  for (const tag of runs.images) await engine.images.remove(tag).catch(() => false);
  await Promise.all(runs.roots.map((r) => rm(r, { recursive: true, force: true })));
}
