/**
 * Small statistics for benchmark samples. Every number reported is a distribution summary,
 * never a single time: the median (robust against the odd slow run a shared machine
 * produces) and the p90 (what a slow-but-not-pathological repetition costs).
 *
 * - median: the middle sample, or the mean of the two middle samples for an even count.
 * - p90: nearest rank, the smallest sample with at least 90% of samples at or below it
 *   (with 15 samples: the 14th fastest). Never interpolated, so it is always a time that
 *   really happened.
 */

/**
 * @typedef {object} Summary
 * @property {number} n
 * @property {number} medianMs
 * @property {number} p90Ms
 * @property {number} minMs
 * @property {number} maxMs
 * @property {number} meanMs
 * @property {number[]} samplesMs every sample in the order it was taken, rounded to 0.1 ms
 */

/** @param {number} value */
export function round1(value) {
  return Math.round(value * 10) / 10;
}

/** @param {number[]} samples */
export function median(samples) {
  if (samples.length === 0) return Number.NaN;
  const sorted = [...samples].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

/**
 * @param {number[]} samples
 * @param {number} q between 0 and 1
 */
export function quantile(samples, q) {
  if (samples.length === 0) return Number.NaN;
  const sorted = [...samples].sort((a, b) => a - b);
  const rank = Math.max(1, Math.ceil(q * sorted.length));
  return sorted[Math.min(rank, sorted.length) - 1];
}

/**
 * @param {number[]} samples milliseconds
 * @returns {Summary}
 */
export function summarize(samples) {
  const sum = samples.reduce((a, b) => a + b, 0);
  return {
    n: samples.length,
    medianMs: round1(median(samples)),
    p90Ms: round1(quantile(samples, 0.9)),
    minMs: round1(Math.min(...samples)),
    maxMs: round1(Math.max(...samples)),
    meanMs: round1(samples.length ? sum / samples.length : Number.NaN),
    samplesMs: samples.map(round1),
  };
}

/**
 * How many times slower (> 1) or faster (< 1) `subject` is than `reference`, by median and
 * by p90.
 *
 * @param {Summary} subject
 * @param {Summary} reference
 */
export function ratio(subject, reference) {
  const r = (/** @type {number} */ a, /** @type {number} */ b) =>
    b > 0 ? Math.round((a / b) * 100) / 100 : null;
  return { median: r(subject.medianMs, reference.medianMs), p90: r(subject.p90Ms, reference.p90Ms) };
}
