import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError, Interrupted, UsageError } from '../../../src/errors.js';
import type { RepoImageRequest } from '../../../src/image-context/request.js';
import type { SandboxProvider } from '../../../src/sandbox/types.js';
import { closeTrials, runSuite, type SuiteOptions } from '../../../src/evals/run-suite.js';
import { BackgroundRemovals } from '../../../src/sandbox/removals.js';
import { ROOT } from '../../helpers/cli.js';
import { withTempDir } from './helpers.js';

const SUITE = path.join(ROOT, 'examples/evals/suite.yaml');

function options(dir: string, extra: Partial<SuiteOptions> = {}): SuiteOptions {
  return {
    suiteFile: SUITE,
    displayPath: 'examples/evals/suite.yaml',
    cwd: ROOT,
    env: {},
    signal: new AbortController().signal,
    outDir: path.join(dir, 'out'),
    resume: false,
    ...extra,
  };
}

/** Any use of an engine fails the test: these inputs must be refused before one is asked for. */
const noEngine = {
  provider: () => Promise.reject(new Error('the engine was asked for')),
  engines: () => Promise.reject(new Error('the engines were asked for')),
};

describe('runSuite refuses bad input before any engine is used', () => {
  it('instance options on a task suite are a usage error', async () => {
    await withTempDir(async (dir) => {
      await expect(runSuite(options(dir, { sourceFlags: { oracle: true } }), noEngine)).rejects.toThrow(
        UsageError,
      );
    });
  });

  it('a --compare file that is not a summary is a ConfigError naming the field', async () => {
    await withTempDir(async (dir) => {
      const file = path.join(dir, 'old.json');
      await writeFile(file, JSON.stringify({ schemaVersion: 1, tasks: 'none' }));
      const error = await runSuite(
        options(dir, { compare: { file, displayPath: 'old.json' } }),
        noEngine,
      ).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ConfigError);
      expect((error as ConfigError).problems.join('\n')).toMatch(
        /^old\.json:1:\d+ tasks: expected a list, got "none"$/m,
      );
    });
  });
});

describe('runSuite stops when interrupted', () => {
  // A short limit: without the signal the build never ends, and the test should say so soon.
  it(
    'while it prepares the images: the build gets the signal, and the eval ends at once',
    { timeout: 15_000 },
    async () => {
      await withTempDir(async (dir) => {
        const controller = new AbortController();
        let asked: AbortSignal | undefined;
        const provider = {
          backend: { name: 'fake', engine: 'local' },
          preflight: async () => undefined,
          repoImage: (request: RepoImageRequest) => {
            asked = request.signal;
            // A build of minutes: it ends only when told to stop.
            setTimeout(() => controller.abort(), 10);
            return new Promise((_, reject) =>
              request.signal?.addEventListener('abort', () => reject(new Interrupted('build stopped'))),
            );
          },
        } as unknown as SandboxProvider;
        const started = Date.now();
        const error = await runSuite(options(dir, { signal: controller.signal }), {
          provider: async () => provider,
        }).catch((e: unknown) => e);
        expect(asked).toBeDefined();
        expect(error).toBeInstanceOf(Interrupted);
        expect(Date.now() - started).toBeLessThan(5_000);
      });
    },
  );
});

describe("the end of an eval's trials", () => {
  it('waits for the removals, names the ones that failed, then drains the pools, then stops the engines', async () => {
    const order: string[] = [];
    const removals = new BackgroundRemovals();
    let finish = () => {};
    await removals.add('attempt-1 (abc)', () =>
      new Promise<void>((resolve) => (finish = resolve)).then(() => {
        order.push('removed');
      }),
    );
    await removals.add('verify-1 (def)', () => Promise.reject(new Error('engine said no')));
    const said: string[] = [];
    const closing = closeTrials({
      removals,
      pools: { drain: async () => void order.push('drained') },
      setups: {
        drain: async () => {
          order.push('setups');
          return [{ image: 'sandbox-harness-fork:t1-ab', message: 'in use' }];
        },
      },
      engines: { stop: () => void order.push('stopped') },
      say: (line) => said.push(line),
    });
    await new Promise((resolve) => setTimeout(resolve, 10));
    // Nothing goes while a removal still needs the engine.
    expect(order).toEqual([]);
    finish();
    await closing;
    // The setups' images go once no sandbox (removed or waiting in a pool) is made from them.
    expect(order).toEqual(['removed', 'drained', 'setups', 'stopped']);
    expect(said).toEqual([
      'could not remove verify-1 (def): engine said no (`sandbox-harness gc` removes it)',
      'could not remove setup image sandbox-harness-fork:t1-ab: in use (`sandbox-harness gc` removes it)',
    ]);
  });
});
