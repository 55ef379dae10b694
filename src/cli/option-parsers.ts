/**
 * Flag values are parsed once, where commander reads them: each kind of value (an integer in
 * a range, a positive number of some unit, a duration, US dollars) has one parser here, and
 * a flag of that kind reaches its command's action as a number. A bad value is a usage error
 * (exit 2, and JSON on stdout with `--json`, like every other error) that names the flag,
 * what was expected and what was given; nothing after the edge checks it again.
 *
 * Choices are commander's own `.choices()` (see `shared-options.ts`): parsed at the same
 * edge, typed as the union of the choices by `@commander-js/extra-typings`.
 */
import { Option } from '@commander-js/extra-typings';
import { UsageError } from '../errors.js';
import { parseShard } from '../evals/shards.js';

/** What a parser makes of a flag's text, and a text it takes (the tests that walk the program read them). */
export interface FlagKind {
  kind: 'integer' | 'number' | 'duration' | 'usd';
  sample: string;
}

const kinds = new WeakMap<object, FlagKind>();

/** The kind of value an option's parser makes, or undefined for a plain string (or a choice). */
export function flagKind(option: { parseArg?: unknown }): FlagKind | undefined {
  return typeof option.parseArg === 'function' ? kinds.get(option.parseArg) : undefined;
}

function refuse(flag: string, expected: string, got: string): never {
  throw new UsageError(`${flag}: expected ${expected}, got "${got}"`);
}

export interface IntegerRange {
  min: number;
  /** No upper bound when absent. */
  max?: number;
  /** What the error says was expected (default: "an integer from MIN to MAX"). */
  expected?: string;
}

/** A whole decimal number in the range: `3`, not `3.0`, `0x3`, `3e0` or an empty string. */
export function parseInteger(flag: string, text: string, range: IntegerRange): number {
  const expected =
    range.expected ??
    (range.max === undefined
      ? `an integer of at least ${range.min}`
      : `an integer from ${range.min} to ${range.max}`);
  const trimmed = text.trim();
  const value = /^\d{1,15}$/.test(trimmed) ? Number(trimmed) : Number.NaN;
  if (!Number.isSafeInteger(value) || value < range.min || (range.max !== undefined && value > range.max))
    refuse(flag, expected, text);
  return value;
}

/** A number greater than 0 of `unit`s (`--timeout 0.5` is half a second). */
export function parsePositiveNumber(flag: string, text: string, unit: string): number {
  const value = Number(text);
  if (!Number.isFinite(value) || value <= 0) refuse(flag, `a number of ${unit}`, text);
  return value;
}

const DURATION = /^(\d+(?:\.\d+)?)\s*(s|m|h|d)$/;
const DURATION_UNITS = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;

/** `90s`, `30m`, `24h`, `7d`: milliseconds. */
export function parseDuration(flag: string, text: string): number {
  const match = DURATION.exec(text.trim());
  if (!match) refuse(flag, 'a duration such as 30m, 24h or 7d', text);
  return Number(match[1]) * DURATION_UNITS[match[2] as keyof typeof DURATION_UNITS];
}

/** A positive number of US dollars; a leading `$` is fine. */
export function parseUsd(flag: string, text: string): number {
  const value = Number(text.trim().replace(/^\$/, ''));
  if (!Number.isFinite(value) || value <= 0) refuse(flag, 'a positive number of US dollars', text);
  return value;
}

/**
 * The flag an error names: the first one of `flags` (`-n` of `-n, --n <n>`, as people type
 * it), so a message says what the user wrote.
 */
function flagLabel(flags: string): string {
  return flags.split(/[ ,|]+/)[0] ?? flags;
}

function parser<T>(kind: FlagKind, parse: (text: string) => T): (text: string) => T {
  kinds.set(parse, kind);
  return parse;
}

export function integerOption<const Flags extends string>(
  flags: Flags,
  description: string,
  range: IntegerRange,
) {
  const flag = flagLabel(flags);
  return new Option(flags, description).argParser(
    parser({ kind: 'integer', sample: String(range.min) }, (text) => parseInteger(flag, text, range)),
  );
}

/** A positive number of `unit` (seconds, for example). */
export function positiveNumberOption<const Flags extends string>(
  flags: Flags,
  description: string,
  unit: string,
) {
  const flag = flagLabel(flags);
  return new Option(flags, description).argParser(
    parser({ kind: 'number', sample: '1.5' }, (text) => parsePositiveNumber(flag, text, unit)),
  );
}

/** A duration (`30m`, `24h`, `7d`), in milliseconds. */
export function durationOption<const Flags extends string>(flags: Flags, description: string) {
  const flag = flagLabel(flags);
  return new Option(flags, description).argParser(
    parser({ kind: 'duration', sample: '30m' }, (text) => parseDuration(flag, text)),
  );
}

/** US dollars (`--cost-limit 2.50`, `--cost-limit '$2.50'`). */
export function usdOption<const Flags extends string>(flags: Flags, description: string) {
  const flag = flagLabel(flags);
  return new Option(flags, description).argParser(
    parser({ kind: 'usd', sample: '$2.50' }, (text) => parseUsd(flag, text)),
  );
}

/**
 * A shard of a sharded eval, `K/N` (1-based: shard 1 of 2 is `1/2`), as `{ index, count }`.
 * Not a `FlagKind`: its value is a pair, not a number.
 */
export function shardOption<const Flags extends string>(flags: Flags, description: string) {
  const flag = flagLabel(flags);
  return new Option(flags, description).argParser((text: string) => parseShard(flag, text));
}
