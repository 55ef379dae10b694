/**
 * Instance benchmark: an oracle run (`eval --oracle`: the gold patches instead of a model) of
 * the example instance suite (`examples/instances/suite.yaml`: the shipping service and
 * examples/parcels) on a throw-away copy, at concurrency 2. Trials per minute and the
 * harness's overhead per trial are measured as in `eval-bench.mjs` (its `runSuite`), so the
 * row sits next to the task suite's: what instances cost beyond it is the working copy and
 * the per-test report (read, parsed, judged).
 */
import { cp, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { onCleanup } from './process.mjs';
import { runSuite } from './eval-bench.mjs';

/**
 * @param {{ packageRoot: string, n: number, log: (line: string) => void, keepTemp?: boolean }} o
 */
export async function benchInstances(o) {
  const parent = await mkdtemp(join(tmpdir(), 'sandbox-harness-bench-instances-'));
  const remove = () => rm(parent, { recursive: true, force: true });
  if (!o.keepTemp) onCleanup(remove);
  try {
    const skip = (/** @type {string} */ source) => !source.split(/[\\/]/).includes('.sandbox-harness');
    const copy = { recursive: true, filter: skip, verbatimSymlinks: true };
    for (const folder of ['shipping-service', 'parcels', 'instances'])
      await cp(join(o.packageRoot, 'examples', folder), join(parent, folder), copy);
    o.log(`  eval --oracle -n ${o.n} --concurrency 2 of examples/instances/suite.yaml ...`);
    const run = await runSuite({
      cli: join(o.packageRoot, 'dist', 'main.js'),
      suite: join(parent, 'instances', 'suite.yaml'),
      n: o.n,
      concurrency: 2,
      extra: ['--oracle'],
      outDir: join(parent, 'out'),
      cwd: parent,
    });
    return {
      ...run,
      suite: 'examples/instances/suite.yaml --oracle',
      ...(o.keepTemp ? { tempDir: parent } : {}),
    };
  } finally {
    if (!o.keepTemp) await remove();
  }
}
