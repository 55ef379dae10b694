/**
 * Reward files as hostile data: reward.txt must be exactly one number, reward.json a flat
 * object of named numbers with the score under "reward"; anything else (huge, nested, NaN,
 * odd names, no score) is refused with the reason. Read from a sandbox: bounded, no link.
 */
import { describe, expect, it } from 'vitest';
import {
  parseRewardJson,
  parseRewardText,
  readReward,
  REWARD_LIMITS,
} from '../../../src/test-results/reward.js';
import { SandboxFileError } from '../../../src/errors.js';
import type { Sandbox } from '../../../src/sandbox/types.js';

describe('reward.txt', () => {
  it('reads one number', () => {
    expect(parseRewardText('1\n')).toEqual({
      ok: true,
      reward: { score: 1, values: { reward: 1 }, file: 'reward.txt' },
    });
    expect(parseRewardText(' 0.25 ')).toMatchObject({ ok: true, reward: { score: 0.25 } });
  });

  it.each([
    ['', /expected one number/],
    ['1\n1', /expected one number/],
    ['yes', /expected one number/],
    ['NaN', /expected one number/],
    ['1e400', /not a finite number/],
    ['1e12', /beyond/],
    ['0x1', /expected one number/],
    ['-1', /the reward is negative \(-1\); a score is 0 or more/],
    ['-1e9', /negative/],
  ])('refuses %j', (text, reason) => {
    const r = parseRewardText(text);
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.reason).toMatch(reason);
  });
});

describe('reward.json', () => {
  it('reads named numbers, the score under "reward" (booleans as 1/0, as Harbor reads them)', () => {
    expect(parseRewardJson('{"reward": 0.5, "resolved": false, "f2p": 3}')).toEqual({
      ok: true,
      reward: { score: 0.5, values: { reward: 0.5, resolved: 0, f2p: 3 }, file: 'reward.json' },
    });
    expect(parseRewardJson('{"accuracy": 1}')).toMatchObject({ ok: true, reward: { score: 1 } });
    // Only the score is compared and averaged; another named value may be below 0.
    expect(parseRewardJson('{"reward": 1, "delta": -0.2}')).toMatchObject({
      ok: true,
      reward: { score: 1, values: { delta: -0.2 } },
    });
  });

  it.each([
    ['[1]', /expected an object of named numbers/],
    ['{}', /empty/],
    ['{"reward": {"nested": 1}}', /reward: expected a number, got an object/],
    ['{"reward": "1"}', /expected a number, got string/],
    ['{"a": 1, "b": 1}', /no "reward" among 2 names/],
    ['{"__proto__": 1}', /expected a name/],
    ['{"bad name": 1}', /expected a name/],
    [
      JSON.stringify(Object.fromEntries(Array.from({ length: 101 }, (_, i) => [`k${i}`, 1]))),
      /more than 100 names/,
    ],
    ['{"reward": 1', /not JSON/],
    ['{"reward": -1000000000, "f2p": 3}', /reward is negative/],
    ['{"accuracy": -0.5}', /accuracy is negative/],
    ['{"reward": 1, "delta": -1e12}', /delta is beyond/],
  ])('refuses %s', (text, reason) => {
    const r = parseRewardJson(text);
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.reason).toMatch(reason);
  });
});

describe('reading from the sandbox', () => {
  function box(
    files: Record<string, Buffer | SandboxFileError>,
    asked: Array<{ path: string; maxBytes?: number }>,
  ): Sandbox {
    return {
      readFile: async (path: string, options?: { maxBytes?: number }) => {
        asked.push({ path, ...(options?.maxBytes !== undefined ? { maxBytes: options.maxBytes } : {}) });
        const f = files[path];
        if (f instanceof SandboxFileError) throw f;
        if (!f) throw new SandboxFileError(`${path}: missing`, 'missing');
        return f;
      },
    } as unknown as Sandbox;
  }

  it('asks for a bounded read, reward.json first (as Harbor reads it), reward.txt only without it', async () => {
    const asked: Array<{ path: string; maxBytes?: number }> = [];
    const both = { 'd/reward.txt': Buffer.from('1'), 'd/reward.json': Buffer.from('{"reward":0.5,"a":1}') };
    const r = await readReward(box(both, asked), 'd');
    expect(r).toMatchObject({
      ok: true,
      reward: { score: 0.5, values: { reward: 0.5, a: 1 }, file: 'reward.json' },
    });
    expect(asked).toEqual([{ path: 'd/reward.json', maxBytes: REWARD_LIMITS.maxBytes }]);
    const txt = await readReward(box({ 'd/reward.txt': Buffer.from('0.25\n') }, []), 'd');
    expect(txt).toMatchObject({ ok: true, reward: { score: 0.25, file: 'reward.txt' } });
    // A refused reward.json is the answer: a reward.txt beside it never stands in for it.
    const refused = await readReward(
      box(
        { 'd/reward.json': new SandboxFileError('x', 'through-link'), 'd/reward.txt': Buffer.from('1') },
        [],
      ),
      'd',
    );
    expect(refused).toEqual({
      ok: false,
      reason: 'reward.json refused: it is a symlink, or a folder on the way is',
    });
  });

  it('says why when a file is a link, too large, or absent', async () => {
    const link = await readReward(
      box({ 'd/reward.txt': new SandboxFileError('x', 'through-link') }, []),
      'd',
    );
    expect(link).toEqual({
      ok: false,
      reason: 'reward.txt refused: it is a symlink, or a folder on the way is',
    });
    const big = await readReward(box({ 'd/reward.json': new SandboxFileError('x', 'too-large') }, []), 'd');
    expect(big).toEqual({
      ok: false,
      reason: `reward.json refused: larger than ${REWARD_LIMITS.maxBytes} bytes`,
    });
    const none = await readReward(box({}, []), 'd');
    expect(none).toMatchObject({ ok: false, reason: expect.stringMatching(/wrote no reward/) });
  });
});
