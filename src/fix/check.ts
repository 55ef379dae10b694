/**
 * `check`, the preflight of a catalog: the steps of `fix` that need no model. It builds (or
 * reuses) the sandbox image with the catalog's settings and runs the test command once on
 * the untouched repo, then says what a run would meet: the image and its base, how long the
 * build and the tests took, the exit code, and whether the tests fail as a ticket expects.
 * The same classifier as the baseline of `fix` tells a broken test command from failing
 * tests, so what `check` calls broken is exactly what `fix` would stop at.
 *
 * Nothing is written to the repo but `.sandbox-harness/checks/<id>/` (the build log and
 * the test output, both git-ignored); the sandbox is removed afterwards.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import {
  catalogSandboxEnv,
  catalogSandboxFile,
  loadCatalog,
  resourcesFromCatalog,
  type LoadedCatalog,
} from '../catalog/load.js';
import { verificationLayers, type Catalog } from '../catalog/schema.js';
import { formatDuration } from '../format.js';
import { newRunId, runsDirFor } from '../runs/record.js';
import { brokenKey, brokenLayer } from './baseline.js';
import type { BrokenTestCommand } from './baseline-cache.js';
import type { FixDeps } from './types.js';
import { catalogImageOptions } from './deps.js';
import { buildLines, silentProgress, type ProgressSink } from './progress.js';
import { hostRepoLookup, testRunHints } from './import-hints.js';
import { formatTestRun, runTestLayers } from './test-layers.js';

/** What a check expects of the tests on the untouched repo: a ticket's fail, an eval's may pass. */
export type CheckExpectation = 'failing' | 'passing' | 'any';

export interface CheckOptions {
  catalogFile: string;
  repoDir?: string;
  cwd: string;
  rebuild: boolean;
  expect: CheckExpectation;
  signal: AbortSignal;
  progress?: ProgressSink;
}

/**
 * `broken`: the test command did not run the tests (what `fix` stops at, exit 2);
 * `failing`: the tests ran and fail (what a ticket needs); `passing`: they ran and pass.
 */
export type CheckVerdict = 'broken' | 'failing' | 'passing';

export interface CheckLayer {
  name: string;
  command: string;
  exitCode: number;
  timedOut: boolean;
  durationMs: number;
}

export interface CheckResult {
  catalog: { name: string; file: string };
  repoDir: string;
  image: {
    tag: string;
    id: string;
    reused: boolean;
    /** The base the image was built on, when known (absent for a prebuilt `sandbox.image`). */
    base?: string;
    sizeBytes?: number | undefined;
    buildNetwork?: boolean | undefined;
  };
  /** Time to build or find the image. */
  buildMs: number;
  tests: {
    layers: CheckLayer[];
    durationMs: number;
    /** The failing layer's exit code, else 0. */
    exitCode: number;
    failingLayer?: string;
  };
  verdict: CheckVerdict;
  broken?: BrokenTestCommand;
  expect: CheckExpectation;
  /** Whether the verdict is what was expected (never for `broken`). */
  asExpected: boolean;
  /** One sentence for a person: what the verdict means for `fix`. */
  meaning: string;
  /**
   * What the tests could not import that no agent can make importable from the editable
   * files (a package under `src/` not on `PYTHONPATH`, a module not installed): one sentence each.
   */
  hints: string[];
  /** Where the build log and the whole test output were written. */
  dir: string;
}

export async function runCheck(options: CheckOptions, deps: FixDeps): Promise<CheckResult> {
  const progress = options.progress ?? silentProgress;
  progress.phase('validate', 'checking the catalog');
  const catalog = await loadCatalog(options.catalogFile, { cwd: options.cwd });
  const repoDir = options.repoDir ? resolve(options.cwd, options.repoDir) : catalog.repoDir;
  await deps.ping();
  progress.end(`${catalog.catalog.name}: ${repoDir}`);
  const dir = await checkDir(repoDir);

  progress.phase('image', 'sandbox image');
  const buildStarted = Date.now();
  const image = await deps.image({
    repoDir,
    ...catalogImageOptions(catalog),
    rebuild: options.rebuild,
    logFile: join(dir, 'image-build.log'),
    onProgress: buildLines(progress),
    signal: options.signal,
  });
  const buildMs = Date.now() - buildStarted;
  progress.end(
    `${image.tag}${image.reused ? ' (cached)' : ' (built)'}${image.baseImage ? ` on ${image.baseImage}` : ''}`,
  );

  const layers = verificationLayers(catalog.catalog);
  progress.phase(
    'baseline',
    `running the tests once on the untouched repo: ${layers.map((l) => l.command).join(' && ')}`,
  );
  const tests = await testOnce(deps, catalog, image.tag, layers, options.signal, (line) =>
    progress.detail(line),
  );
  const output = formatTestRun(tests);
  await writeFile(join(dir, 'test-output.txt'), output);
  const broken = brokenLayer(tests);
  const verdict: CheckVerdict = broken ? 'broken' : tests.passed ? 'passing' : 'failing';
  const asExpected = verdict !== 'broken' && (options.expect === 'any' || options.expect === verdict);
  progress.end(`${verdict} (exit ${tests.failingLayer?.exitCode ?? 0}, ${formatDuration(tests.durationMs)})`);
  const hints = await testRunHints(
    output,
    verdict === 'passing',
    hostRepoLookup(repoDir),
    catalog.catalog.sandbox.env,
  );

  return {
    catalog: { name: catalog.catalog.name, file: catalog.file },
    repoDir,
    image: {
      tag: image.tag,
      id: image.imageId,
      reused: image.reused,
      ...(image.baseImage ? { base: image.baseImage } : {}),
      sizeBytes: image.sizeBytes,
      buildNetwork: image.buildNetwork,
    },
    buildMs,
    tests: {
      layers: tests.layers.map((l) => ({
        name: l.name,
        command: l.command,
        exitCode: l.exitCode,
        timedOut: l.timedOut,
        durationMs: l.durationMs,
      })),
      durationMs: tests.durationMs,
      exitCode: tests.failingLayer?.exitCode ?? 0,
      ...(tests.failingLayer ? { failingLayer: tests.failingLayer.name } : {}),
    },
    verdict,
    ...(broken ? { broken } : {}),
    expect: options.expect,
    asExpected,
    meaning: meaningOf(verdict, broken, catalog.catalog),
    hints,
    dir,
  };
}

function meaningOf(verdict: CheckVerdict, broken: BrokenTestCommand | undefined, catalog: Catalog): string {
  switch (verdict) {
    case 'broken':
      return `the test command itself failed to run: ${broken?.reason ?? 'unknown'}. \`fix\` and \`eval\` would stop here with exit 2; fix ${broken ? brokenKey(broken, catalog) : 'agent.testCommand'} (or the repo's scripts) first.`;
    case 'failing':
      return 'the tests run and fail on the untouched repo, as a ticket expects: `fix` has something to verify a change against.';
    case 'passing':
      return 'the tests run and pass on the untouched repo: `fix` would end nothing-to-fix (fine for an eval task whose held-out tests decide, or with --force).';
  }
}

/** The test command once, in a sandbox made as `fix` makes its baseline's (catalog, env, limits). */
async function testOnce(
  deps: FixDeps,
  catalog: LoadedCatalog,
  image: string,
  layers: ReturnType<typeof verificationLayers>,
  signal: AbortSignal,
  onLine: (line: string) => void,
) {
  const box = await deps.backend.create({
    image,
    runId: `check-${newRunId()}`,
    role: 'check',
    env: { ...catalog.catalog.sandbox.env, ...catalogSandboxEnv() },
    resources: resourcesFromCatalog(catalog.catalog),
    files: [catalogSandboxFile(catalog)],
    keep: 'never',
  });
  try {
    return await runTestLayers(box, layers, {
      timeoutMs: catalog.catalog.sandbox.timeouts.testSec * 1000,
      signal,
      onLayer: (layer) => onLine(`$ ${layer.command}`),
    });
  } finally {
    await box.dispose().catch(() => undefined);
  }
}

/** `<repo>/.sandbox-harness/checks/<id>/`, kept out of git status like run records. */
async function checkDir(repoDir: string): Promise<string> {
  const harnessDir = dirname(runsDirFor(repoDir));
  const dir = join(harnessDir, 'checks', newRunId());
  await mkdir(dir, { recursive: true });
  await writeFile(join(harnessDir, '.gitignore'), '*\n', { flag: 'wx' }).catch(() => undefined);
  return dir;
}
