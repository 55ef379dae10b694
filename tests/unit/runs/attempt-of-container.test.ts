/**
 * Which attempt a recorded container served: `shell --attempt N`, `rerun-tests` and `inspect`
 * find an attempt's sandbox by it, also for a replayed patch, whose attempt wrote into its
 * verification sandbox and had none of its own.
 */
import { describe, expect, it } from 'vitest';
import type { ContainerRecord } from '../../../src/runs/record.js';
import { attemptOfContainer } from '../../../src/runs/attempt-roles.js';
import { keptAttemptSandbox } from '../../../src/cli/run-lookup.js';
import type { StoredRun } from '../../../src/runs/record.js';

const box = (role: string, kept = true): ContainerRecord => ({
  role,
  id: `${role}-id`,
  kept,
  engine: 'local',
});

describe('attemptOfContainer', () => {
  it("an agent's run: the attempt sandboxes are the attempts', never their verifications", () => {
    const all = [box('attempt-1'), box('verify-1'), box('baseline'), box('attempt-2'), box('verify-2')];
    expect(all.map((c) => attemptOfContainer(c, all))).toEqual([1, undefined, undefined, 2, undefined]);
  });

  it("a replayed patch's run: the verification sandbox was its attempt's", () => {
    const all = [box('baseline'), box('verify-1'), box('verify-1-visible')];
    expect(all.map((c) => attemptOfContainer(c, all))).toEqual([undefined, 1, undefined]);
  });

  it('shell --attempt finds the kept verification sandbox of a replayed patch, and says which attempts kept one', () => {
    const run = {
      record: {
        id: 'r1',
        outcome: 'failed',
        keep: 'on-failure',
        containers: [box('baseline'), box('verify-1')],
      },
    } as unknown as StoredRun;
    expect(keptAttemptSandbox(run, 1)).toEqual({ id: 'verify-1-id', runId: 'r1' });
    expect(keptAttemptSandbox(run, undefined)).toEqual({ id: 'verify-1-id', runId: 'r1' });
    expect(() => keptAttemptSandbox(run, 2)).toThrow('kept attempts: 1');
  });
});
