/**
 * Small, pure statistics for eval results. Everything here works on counts, so it can be
 * checked against numbers worked out by hand.
 */

/** Two-sided 95% normal quantile (the 0.975 quantile of N(0, 1)). */
export const Z_95 = 1.959963984540054;

export interface Interval {
  low: number;
  high: number;
}

function assertCounts(n: number, c: number): void {
  if (!Number.isInteger(n) || n < 0)
    throw new RangeError(`trial count must be a non-negative integer, got ${n}`);
  if (!Number.isInteger(c) || c < 0 || c > n) {
    throw new RangeError(`success count must be an integer between 0 and ${n}, got ${c}`);
  }
}

function assertK(n: number, k: number): void {
  if (!Number.isInteger(k) || k < 1 || k > n)
    throw new RangeError(`k must be an integer between 1 and ${n}, got ${k}`);
}

/**
 * Wilson score interval. Chosen over the normal (Wald) interval because it stays inside
 * [0, 1] and does not collapse to a zero-width interval at 0/n or n/n, which is exactly
 * where small evals live. With no trials there is no information: the whole of [0, 1].
 */
export function wilsonInterval(successes: number, trials: number, z: number = Z_95): Interval {
  assertCounts(trials, successes);
  if (trials === 0) return { low: 0, high: 1 };
  const p = successes / trials;
  const z2 = z * z;
  const denominator = 1 + z2 / trials;
  const center = (p + z2 / (2 * trials)) / denominator;
  const margin = (z * Math.sqrt((p * (1 - p)) / trials + z2 / (4 * trials * trials))) / denominator;
  // At 0/n and n/n the bound is exactly 0 or 1 algebraically; float dust (5e-17) would
  // otherwise make a perfect score look imperfect.
  return {
    low: successes === 0 ? 0 : Math.max(0, center - margin),
    high: successes === trials ? 1 : Math.min(1, center + margin),
  };
}

/**
 * Unbiased pass@k estimator of Chen et al. 2021: `1 - C(n-c, k) / C(n, k)`, the chance that
 * at least one of k trials drawn without replacement from the n observed passes. The ratio
 * of binomials is computed as the product `prod_{i=n-c+1..n} (1 - k/i)` because the
 * binomials themselves overflow long before n gets interesting.
 */
export function passAtK(n: number, c: number, k: number): number {
  assertCounts(n, c);
  assertK(n, k);
  // Fewer than k failures: every draw of k contains a pass.
  if (n - c < k) return 1;
  let allFail = 1;
  for (let i = n - c + 1; i <= n; i++) allFail *= 1 - k / i;
  return 1 - allFail;
}

/**
 * pass^k: the chance that k trials drawn without replacement from the n observed all pass,
 * `C(c, k) / C(n, k) = prod_{i=0..k-1} (c - i) / (n - i)`. It measures reliability, where
 * pass@k measures capability.
 */
export function passHatK(n: number, c: number, k: number): number {
  assertCounts(n, c);
  assertK(n, k);
  if (c < k) return 0;
  let allPass = 1;
  for (let i = 0; i < k; i++) allPass *= (c - i) / (n - i);
  return allPass;
}

/** pass@k for k = 1..n (index 0 holds k = 1). */
export function passAtKCurve(n: number, c: number): number[] {
  return Array.from({ length: n }, (_, i) => passAtK(n, c, i + 1));
}

/** pass^k for k = 1..n (index 0 holds k = 1). */
export function passHatKCurve(n: number, c: number): number[] {
  return Array.from({ length: n }, (_, i) => passHatK(n, c, i + 1));
}

/** Arithmetic mean; `null` for no values, so it survives JSON as "unknown" rather than 0. */
export function mean(values: readonly number[]): number | null {
  if (values.length === 0) return null;
  let sum = 0;
  for (const v of values) sum += v;
  return sum / values.length;
}

/** Median (the mean of the two middle values for an even count); `null` for no values. */
export function median(values: readonly number[]): number | null {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  const upper = sorted[mid] as number;
  if (sorted.length % 2 === 1) return upper;
  return ((sorted[mid - 1] as number) + upper) / 2;
}

/** Do two closed intervals share at least one point? */
export function intervalsOverlap(a: Interval, b: Interval): boolean {
  return a.low <= b.high && b.low <= a.high;
}
