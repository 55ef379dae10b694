import { describe, expect, it } from 'vitest';
import { BuildRefused, ConfigError, ImageError, SandboxUnavailable } from '../../../src/errors.js';
import { assertSomethingRuns, refusingRunner, taskRefusal } from '../../../src/evals/task-refusals.js';
import type { TrialRunner } from '../../../src/evals/types.js';
import { result } from './helpers.js';

describe('one task refused, the rest run', () => {
  it("a configuration error is the task's own, with its hint; an image error only while its image is made", () => {
    expect(taskRefusal(new BuildRefused('would run npm ci', { hint: 'set sandbox.build.exclude' }))).toBe(
      'would run npm ci (hint: set sandbox.build.exclude)',
    );
    expect(taskRefusal(new ConfigError('catalog.yaml:3:1 agent.testCommand: required'))).toBe(
      'catalog.yaml:3:1 agent.testCommand: required',
    );
    const missing = new ImageError("the catalog's sandbox.image acme/env:1 does not exist locally");
    expect(taskRefusal(missing)).toBeUndefined();
    expect(taskRefusal(missing, { image: true })).toMatch(/acme\/env:1 does not exist/);
    // What says nothing about the task stops the eval as before.
    expect(taskRefusal(new SandboxUnavailable('no engine'), { image: true })).toBeUndefined();
    expect(taskRefusal(new Error('a bug'), { image: true })).toBeUndefined();
  });

  it("a refused task's trials are errors with the reason, run nowhere; the others run", async () => {
    const ran: string[] = [];
    const inner: TrialRunner = async (spec) => {
      ran.push(spec.taskId);
      return result(spec, 'ready-for-review');
    };
    const runner = refusingRunner(
      new Map([['bad', { reason: 'the image acme/env:1 does not exist' }]]),
      inner,
    );
    const context: Parameters<TrialRunner>[1] = { engine: 'local', signal: new AbortController().signal };
    const spec = (taskId: string) => ({ taskId, trial: 0, catalog: 'c', ticket: 't' });
    expect(await runner(spec('bad'), context)).toMatchObject({
      taskId: 'bad',
      category: 'error',
      outcome: 'failed',
      error: 'the image acme/env:1 does not exist',
    });
    expect((await runner(spec('good'), context)).category).toBe('ready-for-review');
    expect(ran).toEqual(['good']);
  });

  it("a settled task's trials have its result (an empty prediction's no-changes), run nowhere", async () => {
    const ran: string[] = [];
    const inner: TrialRunner = async (spec) => {
      ran.push(spec.taskId);
      return result(spec, 'ready-for-review');
    };
    const runner = refusingRunner(
      new Map(),
      inner,
      new Map([
        ['empty', { category: 'no-changes' as const, reason: 'an empty patch', model: 'acme/agent-7' }],
      ]),
    );
    const context: Parameters<TrialRunner>[1] = { engine: 'local', signal: new AbortController().signal };
    const settled = await runner({ taskId: 'empty', trial: 1, catalog: 'c', ticket: 't' }, context);
    expect(settled).toMatchObject({
      taskId: 'empty',
      trial: 1,
      category: 'no-changes',
      model: 'acme/agent-7',
    });
    expect(settled.error).toBeUndefined();
    expect(ran).toEqual([]);
  });
});

describe('a suite with every task refused', () => {
  it('is the first refusal, thrown: nothing is left to run', () => {
    const first = new ConfigError('no local clone of acme/a');
    const refused = new Map([
      ['a', { reason: 'no local clone of acme/a', error: first }],
      ['b', { reason: 'catalog broken' }],
    ]);
    expect(() => assertSomethingRuns(refused, 3)).not.toThrow();
    expect(() => assertSomethingRuns(refused, 2)).toThrow(first);
    expect(() => assertSomethingRuns(new Map([['b', { reason: 'catalog broken' }]]), 1)).toThrow(
      /every task is refused: catalog broken/,
    );
  });
});
