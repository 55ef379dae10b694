import { describe, expect, it } from 'vitest';
import { alignColumns, formatBytes, formatDuration, formatMs, textTable } from '../../src/format.js';

const MiB = 1024 ** 2;
const GiB = 1024 ** 3;

describe('formatBytes', () => {
  it('writes whole bytes below a KiB', () => {
    expect(formatBytes(0)).toBe('0 B');
    expect(formatBytes(1)).toBe('1 B');
    expect(formatBytes(1023)).toBe('1023 B');
  });

  it('names binary multiples as such, one decimal below 100, whole above', () => {
    expect(formatBytes(1024)).toBe('1.0 KiB');
    expect(formatBytes(1536)).toBe('1.5 KiB');
    expect(formatBytes(10_000)).toBe('9.8 KiB');
    expect(formatBytes(MiB)).toBe('1.0 MiB');
    expect(formatBytes(1.5 * MiB)).toBe('1.5 MiB');
    expect(formatBytes(480 * MiB)).toBe('480 MiB');
    expect(formatBytes(GiB)).toBe('1.0 GiB');
    expect(formatBytes(2 * GiB)).toBe('2.0 GiB');
    expect(formatBytes(5.25 * GiB)).toBe('5.3 GiB');
    expect(formatBytes(1024 * GiB)).toBe('1.0 TiB');
  });

  it('never writes 1024 of a unit or 100.0: the value rounds into the next form', () => {
    expect(formatBytes(1023.6)).toBe('1.0 KiB');
    expect(formatBytes(MiB - 1)).toBe('1.0 MiB');
    expect(formatBytes(GiB - 1)).toBe('1.0 GiB');
    expect(formatBytes(99.96 * MiB)).toBe('100 MiB');
    expect(formatBytes(99.94 * MiB)).toBe('99.9 MiB');
    expect(formatBytes(1023.4 * MiB)).toBe('1023 MiB');
  });

  it('writes - for a size that is unknown or not a size', () => {
    expect(formatBytes(undefined)).toBe('-');
    expect(formatBytes(null)).toBe('-');
    expect(formatBytes(-1)).toBe('-');
    expect(formatBytes(Number.NaN)).toBe('-');
    expect(formatBytes(Number.POSITIVE_INFINITY)).toBe('-');
  });
});

describe('durations: formatDuration (terminal) and formatMs (pages)', () => {
  const cases: [number, string, string][] = [
    [0, '0ms', '0 ms'],
    [0.4, '0ms', '0 ms'],
    [12.345, '12ms', '12 ms'],
    [850, '850ms', '850 ms'],
    [999.4, '999ms', '999 ms'],
    [999.6, '1.0s', '1.0 s'],
    [1000, '1.0s', '1.0 s'],
    [12_340, '12.3s', '12.3 s'],
    [12_000, '12.0s', '12.0 s'],
    [59_940, '59.9s', '59.9 s'],
    // Rounds to 60.0 s: that is a minute, written as one.
    [59_960, '1m00s', '1 min 00 s'],
    [60_000, '1m00s', '1 min 00 s'],
    [61_000, '1m01s', '1 min 01 s'],
    [185_000, '3m05s', '3 min 05 s'],
    // 119.6 s rounds to 120 s: two minutes, never `1m60s`.
    [119_600, '2m00s', '2 min 00 s'],
    [3_599_000, '59m59s', '59 min 59 s'],
    // 3599.6 s rounds to an hour, never `59m60s` or `60m00s`.
    [3_599_600, '1h00m', '1 h 00 min'],
    [3_720_000, '1h02m', '1 h 02 min'],
    // 1 h 59 min 40 s rounds to two hours, never `1h60m`.
    [7_180_000, '2h00m', '2 h 00 min'],
    [100 * 3_600_000, '100h00m', '100 h 00 min'],
  ];

  it.each(cases)('%d ms reads %s on a terminal and %s on a page', (ms, terminal, page) => {
    expect(formatDuration(ms)).toBe(terminal);
    expect(formatMs(ms)).toBe(page);
  });

  it('writes - for a duration that is unknown or not a duration', () => {
    for (const f of [formatDuration, formatMs]) {
      expect(f(undefined)).toBe('-');
      expect(f(null)).toBe('-');
      expect(f(-5)).toBe('-');
      expect(f(Number.NaN)).toBe('-');
    }
  });
});

describe('tables', () => {
  it('textTable pads every column to its widest cell, under a header and a rule', () => {
    expect(
      textTable(
        [
          { id: 'a', status: 'ready-for-review' },
          { id: 'longer-id', status: 'failed' },
        ],
        ['id', 'status'],
      ),
    ).toBe(
      [
        'id         status',
        '---------  ----------------',
        'a          ready-for-review',
        'longer-id  failed',
      ].join('\n'),
    );
  });

  it('alignColumns right-aligns the columns it is told to and cuts trailing blanks', () => {
    expect(
      alignColumns(
        [
          ['base', 'sandbox-harness/base-node:20', '480 MiB', ''],
          ['repo', 'r:1', '1.2 GiB', 'examples/shop'],
        ],
        [2],
      ),
    ).toEqual([
      'base  sandbox-harness/base-node:20  480 MiB',
      'repo  r:1                           1.2 GiB  examples/shop',
    ]);
  });

  it('alignColumns gives a column empty in every row no room', () => {
    expect(
      alignColumns([
        ['OPS-1', 'pending', '', 'blocked by OPS-0'],
        ['OPS-22', 'done', '', ''],
      ]),
    ).toEqual(['OPS-1   pending  blocked by OPS-0', 'OPS-22  done']);
  });

  it('alignColumns of no rows is no lines', () => {
    expect(alignColumns([])).toEqual([]);
  });
});
