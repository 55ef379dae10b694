import { UsageError } from '../errors.js';

/** `--cost-limit`: a positive number of US dollars (a leading `$` is fine). */
export function parseCostLimit(raw: string | undefined): number | undefined {
  if (raw === undefined) return undefined;
  const value = Number(raw.trim().replace(/^\$/, ''));
  if (!Number.isFinite(value) || value <= 0) {
    throw new UsageError(`--cost-limit: expected a positive number of US dollars, got "${raw}"`);
  }
  return value;
}
