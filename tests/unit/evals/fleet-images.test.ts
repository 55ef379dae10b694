/**
 * An engine of a fleet made ready before its first trial: one task's image refused there is
 * that task's, never the engine's; what says nothing about a task (the engine lost, Ctrl-C)
 * still stops the engine's preparation.
 */
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadCatalog, type LoadedCatalog } from '../../../src/catalog/load.js';
import { BuildRefused, ImageError, SandboxUnavailable } from '../../../src/errors.js';
import { prepareImages, type EvalTask } from '../../../src/evals/engines.js';
import type { FixDeps } from '../../../src/fix/types.js';
import type { SandboxProvider } from '../../../src/sandbox/types.js';
import { ROOT } from '../../helpers/cli.js';

async function tasks(): Promise<EvalTask[]> {
  const loaded = await loadCatalog(join(ROOT, 'examples', 'shipping-service', 'shipping-service.yaml'));
  const withImage = (name: string, image?: string): LoadedCatalog => ({
    ...loaded,
    catalog: {
      ...loaded.catalog,
      name,
      sandbox: { ...loaded.catalog.sandbox, ...(image ? { image } : {}) },
    },
  });
  return [
    { id: 'good', catalog: withImage('good'), repoDir: '/repos/good' },
    { id: 'refused-build', catalog: withImage('refused-build'), repoDir: '/repos/refused-build' },
    { id: 'missing-image', catalog: withImage('missing-image', 'acme/env:1'), repoDir: '/repos/missing' },
  ];
}

function fakes(options: { baseFails?: Error; buildFails?: Record<string, Error> } = {}) {
  const built: string[] = [];
  const provider: Pick<SandboxProvider, 'ensureBaseImage'> = {
    async ensureBaseImage(o) {
      if (o?.image === 'acme/env:1')
        throw new ImageError('acme/env:1 is not on this engine nor on the source');
      if (options.baseFails) throw options.baseFails;
      return { tag: o?.image ?? 'base', how: 'present', durationMs: 0 } as Awaited<
        ReturnType<SandboxProvider['ensureBaseImage']>
      >;
    },
  };
  const deps: Pick<FixDeps, 'image'> = {
    async image(request) {
      const failure = options.buildFails?.[request.repoDir];
      if (failure) throw failure;
      built.push(request.repoDir);
      return { tag: `img-${request.name}`, reused: false } as unknown as Awaited<
        ReturnType<FixDeps['image']>
      >;
    },
  };
  return { provider, deps, built };
}

describe("a fleet engine's images", () => {
  it("one task's refused build or missing image is said and the other tasks' images are made", async () => {
    const { provider, deps, built } = fakes({
      buildFails: {
        '/repos/refused-build': new BuildRefused('would run npm ci', { hint: 'set sandbox.build.exclude' }),
        '/repos/missing': new ImageError('acme/env:1 is not present'),
      },
    });
    const lines: string[] = [];
    await prepareImages(provider, deps, {
      tasks: await tasks(),
      signal: new AbortController().signal,
      logFile: (t) => `/logs/${t.id}.log`,
      say: (l) => lines.push(l),
    });
    expect(built).toEqual(['/repos/good']);
    expect(lines).toContain(
      'acme/env:1 cannot be made present here: acme/env:1 is not on this engine nor on the source',
    );
    expect(lines).toContain(
      'task refused-build: its image is refused here: would run npm ci (hint: set sandbox.build.exclude)',
    );
    expect(lines).toContain('task missing-image: its image is refused here: acme/env:1 is not present');
  });

  it('an engine lost or Ctrl-C stops the preparation', async () => {
    const lost = fakes({ baseFails: new SandboxUnavailable('the engine does not answer') });
    const options = {
      tasks: await tasks(),
      signal: new AbortController().signal,
      logFile: () => '/logs/x.log',
      say: () => undefined,
    };
    await expect(prepareImages(lost.provider, lost.deps, options)).rejects.toThrow(
      'the engine does not answer',
    );
    // After Ctrl-C a failure is the stop's, never one task's refusal to go on past.
    const stop = new AbortController();
    stop.abort(new Error('Ctrl-C'));
    const stopped = fakes();
    await expect(
      prepareImages(stopped.provider, stopped.deps, { ...options, signal: stop.signal }),
    ).rejects.toThrow('acme/env:1 is not on this engine');
    expect(stopped.built).toEqual([]);
  });
});
