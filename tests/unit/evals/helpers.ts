import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { Suite } from '../../../src/evals/suite.js';
import type { TrialCategory, TrialResult, TrialSpec } from '../../../src/evals/types.js';

/** A suite built in memory; the scheduler only needs ids, paths and defaults. */
export function fakeSuite(
  ids: string[],
  options: { n?: number; concurrency?: number; sha256?: string | undefined } = {},
): Suite {
  return {
    file: '/suites/fake.yaml',
    sha256: options.sha256 ?? 'a'.repeat(64),
    name: 'fake',
    defaults: { n: options.n ?? 3, concurrency: options.concurrency ?? 1, timeouts: {}, keep: 'never' },
    tasks: ids.map((id) => ({ id, catalog: `/catalogs/${id}.yaml`, ticket: `ticket for ${id}` })),
  };
}

export function result(
  spec: Pick<TrialSpec, 'taskId' | 'trial'>,
  category: TrialCategory,
  extra: Partial<TrialResult> = {},
): TrialResult {
  return {
    taskId: spec.taskId,
    trial: spec.trial,
    outcome: category === 'ready-for-review' ? 'passed' : 'failed',
    category,
    turns: 4,
    inputTokens: 1000,
    outputTokens: 200,
    durationMs: 1500,
    startedAt: '2026-01-01T00:00:00.000Z',
    finishedAt: '2026-01-01T00:00:01.500Z',
    ...extra,
  };
}

export async function withTempDir<T>(fn: (dir: string) => Promise<T>): Promise<T> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'evals-'));
  try {
    return await fn(dir);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

export function delay(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener(
      'abort',
      () => {
        clearTimeout(timer);
        reject(signal.reason instanceof Error ? signal.reason : new Error('aborted'));
      },
      { once: true },
    );
  });
}
