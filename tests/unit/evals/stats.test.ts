import { describe, expect, it } from 'vitest';
import {
  intervalsOverlap,
  mean,
  median,
  passAtK,
  passAtKCurve,
  passHatK,
  passHatKCurve,
  wilsonInterval,
} from '../../../src/evals/stats.js';

// Worked by hand with z = 1.96, z^2 = 3.8415:
//   denominator = 1 + z^2/n, centre = (p + z^2/2n) / denominator,
//   margin = z * sqrt(p(1-p)/n + z^2/4n^2) / denominator.
describe('wilsonInterval', () => {
  it('gives [0.2077, 0.9385] for 2 passes out of 3', () => {
    // denominator 2.2805, centre (0.6667 + 0.6402) / 2.2805 = 0.5731,
    // margin 1.96 * sqrt(0.07407 + 0.10671) / 2.2805 = 0.3654
    const { low, high } = wilsonInterval(2, 3);
    expect(low).toBeCloseTo(0.2077, 3);
    expect(high).toBeCloseTo(0.9385, 3);
  });

  it('starts at exactly 0 for 0 passes and stays wider than zero', () => {
    // centre = margin = 0.6402 / 2.2805 = 0.2807, so [0, 0.5615]
    const { low, high } = wilsonInterval(0, 3);
    expect(low).toBe(0);
    expect(high).toBeCloseTo(0.5615, 3);
  });

  it('ends at exactly 1 for all passes', () => {
    const { low, high } = wilsonInterval(3, 3);
    expect(low).toBeCloseTo(0.4385, 3);
    expect(high).toBe(1);
  });

  it('gives [0.7225, 1] for 10 out of 10', () => {
    // centre (1 + 0.19208) / 1.38415 = 0.86123, margin 1.96 * 0.0980 / 1.38415 = 0.13877
    const { low, high } = wilsonInterval(10, 10);
    expect(low).toBeCloseTo(0.7225, 3);
    expect(high).toBe(1);
  });

  it('gives [0.2667, 0.8112] for 5 out of 9', () => {
    // denominator 1.42683, centre (0.5556 + 0.21342) / 1.42683 = 0.53894,
    // margin 1.96 * sqrt(0.027435 + 0.011856) / 1.42683 = 0.27229
    const { low, high } = wilsonInterval(5, 9);
    expect(low).toBeCloseTo(0.2667, 3);
    expect(high).toBeCloseTo(0.8112, 3);
  });

  it('is the whole of [0, 1] with no trials', () => {
    expect(wilsonInterval(0, 0)).toEqual({ low: 0, high: 1 });
  });

  it('narrows as trials grow at the same rate', () => {
    const small = wilsonInterval(5, 10);
    const large = wilsonInterval(500, 1000);
    expect(large.high - large.low).toBeLessThan(small.high - small.low);
  });

  it('refuses more successes than trials', () => {
    expect(() => wilsonInterval(4, 3)).toThrow(RangeError);
  });
});

describe('passAtK (unbiased estimator of Chen et al. 2021)', () => {
  it('equals the plain pass rate for k = 1', () => {
    expect(passAtK(3, 2, 1)).toBeCloseTo(2 / 3, 12);
    expect(passAtK(10, 3, 1)).toBeCloseTo(0.3, 12);
  });

  it('is 1 - C(n-c, k)/C(n, k) for n = 5, c = 2', () => {
    // k=2: 1 - C(3,2)/C(5,2) = 1 - 3/10; k=3: 1 - C(3,3)/C(5,3) = 1 - 1/10; k=4: C(3,4) = 0
    expect(passAtKCurve(5, 2)).toEqual([
      expect.closeTo(0.4, 12),
      expect.closeTo(0.7, 12),
      expect.closeTo(0.9, 12),
      1,
      1,
    ]);
  });

  it('is 1 for k = 2 when only one of three trials failed', () => {
    // C(1, 2) = 0: every pair drawn from {pass, pass, fail} contains a pass
    expect(passAtK(3, 2, 2)).toBe(1);
  });

  it('is 0 for every k when nothing passed and 1 when everything did', () => {
    expect(passAtKCurve(4, 0)).toEqual([0, 0, 0, 0]);
    expect(passAtKCurve(4, 4)).toEqual([1, 1, 1, 1]);
  });

  it('stays finite and in [0, 1] where binomials would overflow', () => {
    // C(2000, 1000) is about 1e600, far past Number.MAX_VALUE; the product form is not.
    const value = passAtK(2000, 3, 1000);
    // 1 - (1000/1998)(999/1999)(998/2000) = 1 - 0.1248...
    expect(value).toBeCloseTo(1 - (1000 / 1998) * (999 / 1999) * (998 / 2000), 12);
    expect(Number.isFinite(passAtK(5000, 1, 2500))).toBe(true);
  });

  it('refuses k outside 1..n', () => {
    expect(() => passAtK(3, 1, 0)).toThrow(RangeError);
    expect(() => passAtK(3, 1, 4)).toThrow(RangeError);
  });
});

describe('passHatK (all k drawn trials pass)', () => {
  it('is C(c, k)/C(n, k) for n = 3, c = 2', () => {
    // k=1: 2/3; k=2: C(2,2)/C(3,2) = 1/3; k=3: C(2,3) = 0
    expect(passHatKCurve(3, 2)).toEqual([expect.closeTo(2 / 3, 12), expect.closeTo(1 / 3, 12), 0]);
  });

  it('is C(c, k)/C(n, k) for n = 5, c = 3', () => {
    // k=2: C(3,2)/C(5,2) = 3/10; k=3: C(3,3)/C(5,3) = 1/10
    expect(passHatK(5, 3, 2)).toBeCloseTo(0.3, 12);
    expect(passHatK(5, 3, 3)).toBeCloseTo(0.1, 12);
    expect(passHatK(5, 3, 4)).toBe(0);
  });

  it('never exceeds pass@k for the same counts', () => {
    for (let k = 1; k <= 6; k++) expect(passHatK(6, 4, k)).toBeLessThanOrEqual(passAtK(6, 4, k));
  });
});

describe('mean and median', () => {
  it('computes the mean', () => {
    expect(mean([2, 4, 9])).toBe(5);
  });

  it('takes the middle value of an odd count, in sorted order', () => {
    expect(median([9, 1, 4])).toBe(4);
  });

  it('averages the two middle values of an even count', () => {
    expect(median([10, 1, 3, 4])).toBe(3.5);
  });

  it('returns null for no values rather than a misleading 0', () => {
    expect(mean([])).toBeNull();
    expect(median([])).toBeNull();
  });

  it('does not reorder the caller’s array', () => {
    const values = [3, 1, 2];
    median(values);
    expect(values).toEqual([3, 1, 2]);
  });
});

describe('intervalsOverlap', () => {
  it('is true for touching or overlapping intervals and false for separated ones', () => {
    expect(intervalsOverlap({ low: 0, high: 0.5 }, { low: 0.5, high: 1 })).toBe(true);
    expect(intervalsOverlap({ low: 0.2, high: 0.6 }, { low: 0.4, high: 0.9 })).toBe(true);
    expect(intervalsOverlap({ low: 0, high: 0.27 }, { low: 0.72, high: 1 })).toBe(false);
  });
});
