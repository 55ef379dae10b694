/** The shared flag parsers: what they take, and errors that name the flag, what was expected and what was given. */
import { describe, expect, it } from 'vitest';
import { UsageError } from '../../../src/errors.js';
import { EXIT_CODES, exitCodeForError } from '../../../src/cli/exit-codes.js';
import {
  durationOption,
  flagKind,
  integerOption,
  parseDuration,
  parseInteger,
  parsePositiveNumber,
  parseUsd,
  positiveNumberOption,
  usdOption,
} from '../../../src/cli/option-parsers.js';

/** The error a parse throws: a usage error (exit 2) with exactly this message. */
function refusal(parse: () => unknown): { message: string; exitCode: number } {
  try {
    parse();
  } catch (error) {
    expect(error).toBeInstanceOf(UsageError);
    return { message: (error as Error).message, exitCode: exitCodeForError(error) };
  }
  throw new Error('the parse did not refuse');
}

describe('integers in a range', () => {
  it('take whole decimal numbers inside the range', () => {
    expect(parseInteger('--max-attempts', '1', { min: 1, max: 10 })).toBe(1);
    expect(parseInteger('--max-attempts', ' 10 ', { min: 1, max: 10 })).toBe(10);
    expect(parseInteger('--port', '0', { min: 0, max: 65535 })).toBe(0);
    expect(parseInteger('--attempt', '123456', { min: 1 })).toBe(123456);
  });

  it.each(['0', '11', 'abc', '2.5', '3.0', '0x3', '3e0', '', ' ', '-1', '+3', '99999999999999999999'])(
    'refuse %j, naming the flag, the range and the text',
    (text) => {
      expect(refusal(() => parseInteger('--max-attempts', text, { min: 1, max: 10 }))).toEqual({
        message: `--max-attempts: expected an integer from 1 to 10, got "${text}"`,
        exitCode: EXIT_CODES.usage,
      });
    },
  );

  it('say what a flag means when told, and "at least" without an upper bound', () => {
    expect(
      refusal(() =>
        parseInteger('--port', '65536', { min: 0, max: 65535, expected: 'a port number from 0 to 65535' }),
      ).message,
    ).toBe('--port: expected a port number from 0 to 65535, got "65536"');
    expect(refusal(() => parseInteger('-n', '0', { min: 1 })).message).toBe(
      '-n: expected an integer of at least 1, got "0"',
    );
  });
});

describe('durations', () => {
  it('take a number and a unit: seconds, minutes, hours, days', () => {
    expect(parseDuration('--older-than', '90s')).toBe(90_000);
    expect(parseDuration('--older-than', '30m')).toBe(1_800_000);
    expect(parseDuration('--older-than', '1.5h')).toBe(5_400_000);
    expect(parseDuration('--older-than', ' 7d ')).toBe(604_800_000);
  });

  it.each(['yesterday', '30', '30 minutes', 'm', '-1h', ''])('refuse %j', (text) => {
    expect(refusal(() => parseDuration('--older-than', text)).message).toBe(
      `--older-than: expected a duration such as 30m, 24h or 7d, got "${text}"`,
    );
  });
});

describe('positive numbers and dollars', () => {
  it('take numbers greater than 0', () => {
    expect(parsePositiveNumber('--timeout', '0.5', 'seconds')).toBe(0.5);
    expect(parsePositiveNumber('--timeout', '120', 'seconds')).toBe(120);
    expect(parseUsd('--cost-limit', '2.50')).toBe(2.5);
    expect(parseUsd('--cost-limit', '$2.50')).toBe(2.5);
  });

  it.each(['0', '-5', 'abc', '', 'Infinity'])('refuse %j', (text) => {
    expect(refusal(() => parsePositiveNumber('--timeout', text, 'seconds')).message).toBe(
      `--timeout: expected a number of seconds, got "${text}"`,
    );
    expect(refusal(() => parseUsd('--cost-limit', text)).message).toBe(
      `--cost-limit: expected a positive number of US dollars, got "${text}"`,
    );
  });
});

describe('options of a kind', () => {
  it('name the flag as it is typed first (-n, not --n) and say their kind and a text they take', () => {
    const n = integerOption('-n, --n <n>', 'trials', { min: 1, max: 1000 });
    expect(() => n.parseArg?.('0', undefined)).toThrow('-n: expected an integer from 1 to 1000, got "0"');
    for (const [option, kind, value] of [
      [n, 'integer', 1],
      [durationOption('--older-than <age>', 'age'), 'duration', 1_800_000],
      [positiveNumberOption('--timeout <sec>', 'timeout', 'seconds'), 'number', 1.5],
      [usdOption('--cost-limit <usd>', 'limit'), 'usd', 2.5],
    ] as const) {
      const found = flagKind(option);
      expect(found?.kind).toBe(kind);
      expect(option.parseArg?.(found!.sample, undefined)).toBe(value);
    }
  });
});
