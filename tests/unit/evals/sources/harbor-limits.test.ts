/**
 * A Harbor task's timeouts and resources, honoured: task.toml's agent.timeout_sec,
 * verifier.timeout_sec, environment.build_timeout_sec, cpus, memory and storage become the
 * generated catalog's limits (Harbor's defaults when absent), read back by the catalog loader
 * as every run reads them; and an eval whose environment build passes build_timeout_sec
 * stops with the task file and the field named, before any trial.
 */
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { loadCatalog, resourcesFromCatalog } from '../../../../src/catalog/load.js';
import { BuildTimeout, Interrupted } from '../../../../src/errors.js';
import { recipeImages } from '../../../../src/evals/engines.js';
import { runSuite } from '../../../../src/evals/run-suite.js';
import { loadHarborSource } from '../../../../src/evals/sources/harbor-source.js';
import { materializeHarbor } from '../../../../src/evals/sources/harbor-materialize.js';
import { catalogImageOptions } from '../../../../src/fix/deps.js';
import type { RepoImage, RepoImageRequest } from '../../../../src/image-context/request.js';
import type { SandboxProvider } from '../../../../src/sandbox/backend-registry.js';

let root: string;
beforeEach(async () => {
  root = await mkdtemp(join(tmpdir(), 'harbor-limits-'));
});
afterEach(() => rm(root, { recursive: true, force: true }));

async function task(
  name: string,
  toml: string,
  dockerfile = 'FROM sandbox-harness/base-node:20\nWORKDIR /app\n',
): Promise<string> {
  const dir = join(root, 'tasks', name);
  for (const sub of ['environment', 'tests']) await mkdir(join(dir, sub), { recursive: true });
  await writeFile(join(dir, 'task.toml'), toml);
  await writeFile(join(dir, 'instruction.md'), 'Do it.\n');
  await writeFile(join(dir, 'environment', 'Dockerfile'), dockerfile);
  await writeFile(join(dir, 'tests', 'test.sh'), 'echo 1 > /logs/verifier/reward.txt\n');
  return dir;
}

/** The generated catalog of the one task in `tasks/<name>`, as a run loads it, and its suite task. */
async function mapped(name: string, toml: string, dockerfile?: string) {
  const dir = await task(name, toml, dockerfile);
  const source = await loadHarborSource(dir, `tasks/${name}`, root);
  const { suite } = await materializeHarbor(source, { outDir: join(root, 'out', name) });
  const suiteTask = suite.tasks[0]!;
  return { suiteTask, catalog: await loadCatalog(suiteTask.catalog, { cwd: root }) };
}

describe("task.toml's limits become the catalog's", () => {
  it('agent, verifier and build timeouts; cpus, memory_mb and storage_mb', async () => {
    const { suiteTask, catalog } = await mapped(
      'set',
      'version = "1.0"\n[agent]\ntimeout_sec = 420.0\n[verifier]\ntimeout_sec = 90.0\n[environment]\nbuild_timeout_sec = 240.0\ncpus = 2\nmemory_mb = 1536\nstorage_mb = 3072\nallow_internet = false\n',
    );
    const sandbox = catalog.catalog.sandbox;
    // The agent's time is its one attempt's; a command may take as long.
    expect(sandbox.timeouts).toMatchObject({ attemptSec: 420, commandSec: 420, testSec: 90, buildSec: 240 });
    // The run holds a baseline, the attempt and a verification (and the build before them).
    expect(sandbox.timeouts.runSec).toBeGreaterThanOrEqual(420 + 2 * 90);
    expect(catalog.catalog.agent.maxAttempts).toBe(1);
    expect(resourcesFromCatalog(catalog.catalog)).toEqual({
      cpus: 2,
      memoryBytes: 1536 * 1024 * 1024,
      diskBytes: 3072 * 1024 * 1024,
    });
    // The build's limit names the task's own file and field.
    expect(catalogImageOptions(catalog, suiteTask.buildLimitFrom).timeLimit).toEqual({
      sec: 240,
      file: 'tasks/set/task.toml',
      field: 'environment.build_timeout_sec',
    });
  });

  it("Harbor's defaults when task.toml says nothing, and its older memory / storage sizes", async () => {
    const { suiteTask, catalog } = await mapped(
      'defaults',
      'version = "1.0"\n[environment]\nmemory = "3G"\nstorage = "512M"\nallow_internet = false\n',
    );
    expect(catalog.catalog.sandbox.timeouts).toMatchObject({ testSec: 600, buildSec: 600 });
    expect(resourcesFromCatalog(catalog.catalog)).toEqual({
      cpus: 1,
      memoryBytes: 3 * 1024 ** 3,
      diskBytes: 512 * 1024 ** 2,
    });
    expect(suiteTask.buildLimitFrom).toEqual({
      file: 'tasks/defaults/task.toml',
      field: "environment.build_timeout_sec (absent: Harbor's default, 600 s)",
    });
    const bare = await mapped('bare', 'version = "1.0"\n');
    expect(resourcesFromCatalog(bare.catalog.catalog)).toEqual({
      cpus: 1,
      memoryBytes: 2048 * 1024 ** 2,
      diskBytes: 10240 * 1024 ** 2,
    });
  });
});

describe('an environment build past build_timeout_sec', () => {
  it('stops the eval before any trial, naming task.toml and the field', async () => {
    await task('slow', 'version = "1.0"\n[environment]\nbuild_timeout_sec = 0.2\nallow_internet = false\n');
    const builds: RepoImageRequest[] = [];
    // An engine whose build never ends by itself: only its signal stops it.
    const provider = {
      backend: {},
      preflight: async () => undefined,
      repoImage: (request: RepoImageRequest) =>
        new Promise<RepoImage>((_, reject) => {
          builds.push(request);
          request.signal?.addEventListener('abort', () => reject(new Interrupted('building: interrupted')));
        }),
    } as unknown as SandboxProvider;
    const error = await runSuite(
      {
        suiteFile: join(root, 'tasks', 'slow'),
        displayPath: 'tasks/slow',
        cwd: root,
        env: {},
        signal: new AbortController().signal,
        outDir: join(root, 'out', 'eval'),
        resume: false,
      },
      { provider: async () => provider },
    ).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(BuildTimeout);
    expect((error as Error).message).toMatch(
      /^tasks\/slow\/task\.toml: environment\.build_timeout_sec: making the sandbox image took longer than its limit of 0\.2 s/,
    );
    expect(builds).toHaveLength(1);
    expect(builds[0]?.signal?.aborted).toBe(true);
  });
});

describe('on a fleet', () => {
  it("ships the images the environment's Dockerfile starts from, as the generated recipe names them", async () => {
    const { catalog } = await mapped(
      'from',
      'version = "1.0"\n[environment]\nallow_internet = false\n',
      'FROM tools.example/builder:1 AS build\nFROM tools.example/runtime:2\nCOPY --from=build /x /x\nCOPY --from=tools.example/data:3 /d /d\nWORKDIR /app\n',
    );
    expect(await recipeImages({ catalog })).toEqual([
      'tools.example/builder:1',
      'tools.example/runtime:2',
      'tools.example/data:3',
    ]);
  });
});
