/**
 * How sizes, durations and plain-text tables are written for people, in one place: the CLI,
 * the progress lines, the eval report, the viewer and the error messages call these, so one
 * quantity reads the same everywhere it is shown. No other file divides by 1000 or 1024 to
 * show a number (pinned by `tests/unit/structure.test.ts`).
 *
 * Two media, two duration styles and no more: terminal text (CLI lines, progress, error
 * messages, test output) is compact (`12.3s`, `3m05s`), where a line must stay short and
 * columns line up; a page (the viewer, the eval report, Markdown and HTML alike) spells its
 * units out (`12.3 s`, `3 min 05 s`) for a reader with room. Both round the same way, so a
 * quantity never reads `60.0 s` or `1m60s`. Sizes read the same in both.
 *
 * Left out on purpose: a setting echoed in the unit it is written in (`timeoutSec` 900 is
 * `the 900s maximum`, the number the model or the user typed), an exact byte count at a
 * limit (`1025 bytes is over the 1024-byte cap`: rounding would hide the difference), and
 * unit conversions for machines (`--json`, records, Inspect's seconds), which are not text.
 */

// ---------------------------------------------------------------------------------------
// Sizes

const BYTE_UNITS = ['KiB', 'MiB', 'GiB', 'TiB', 'PiB'] as const;

/**
 * `512 B`, `9.8 KiB`, `480 MiB`, `1.5 GiB`: binary multiples named as such, like the limits
 * they are compared with (the catalog's `1g` is 1024³ bytes, as Docker reads it). Three
 * significant digits at most; a value never reads `1024 KiB` (that is `1.0 MiB`). `-` for a
 * size that is unknown or not a size (negative, NaN).
 */
export function formatBytes(bytes: number | undefined | null): string {
  if (!isQuantity(bytes)) return '-';
  const whole = Math.round(bytes);
  if (whole < 1024) return `${whole} B`;
  let value = bytes;
  for (const [i, unit] of BYTE_UNITS.entries()) {
    value /= 1024;
    // One decimal below 100, whole above: `99.9 MiB`, `100 MiB`, never `100.0 MiB`.
    const shown = value < 99.95 ? value.toFixed(1) : String(Math.round(value));
    if (Number(shown) < 1024 || i === BYTE_UNITS.length - 1) return `${shown} ${unit}`;
  }
  return '-'; // not reached: the last unit takes any value
}

// ---------------------------------------------------------------------------------------
// Durations

/**
 * A duration cut into what is shown, rounded once and at the precision of the unit chosen:
 * whole milliseconds below a second, tenths of a second below a minute, whole seconds below
 * an hour, whole minutes above. Each unit is chosen after rounding, so 59.96 s is a minute
 * (not `60.0 s`) and 119.6 s two minutes (not `1m60s`).
 */
type Span =
  | { unit: 'ms'; ms: number }
  | { unit: 's'; tenths: number }
  | { unit: 'min'; min: number; sec: number }
  | { unit: 'h'; h: number; min: number };

function spanOf(ms: number): Span {
  const wholeMs = Math.round(ms);
  if (wholeMs < 1000) return { unit: 'ms', ms: wholeMs };
  const tenths = Math.round(ms / 100);
  if (tenths < 600) return { unit: 's', tenths };
  const sec = Math.round(ms / 1000);
  if (sec < 3600) return { unit: 'min', min: Math.floor(sec / 60), sec: sec % 60 };
  const min = Math.round(ms / 60_000);
  return { unit: 'h', h: Math.floor(min / 60), min: min % 60 };
}

/** How a style writes the units, and what goes between a number and its unit. */
interface DurationStyle {
  gap: string;
  ms: string;
  s: string;
  min: string;
  h: string;
}

function written(ms: number | undefined | null, u: DurationStyle): string {
  if (!isQuantity(ms)) return '-';
  const s = spanOf(ms);
  const g = u.gap;
  const two = (n: number) => String(n).padStart(2, '0');
  if (s.unit === 'ms') return `${s.ms}${g}${u.ms}`;
  if (s.unit === 's') return `${(s.tenths / 10).toFixed(1)}${g}${u.s}`;
  if (s.unit === 'min') return `${s.min}${g}${u.min}${g}${two(s.sec)}${g}${u.s}`;
  return `${s.h}${g}${u.h}${g}${two(s.min)}${g}${u.min}`;
}

const TERMINAL: DurationStyle = { gap: '', ms: 'ms', s: 's', min: 'm', h: 'h' };
const PAGE: DurationStyle = { gap: ' ', ms: 'ms', s: 's', min: 'min', h: 'h' };

/**
 * Terminal text: `850ms`, `12.3s`, `3m05s`, `1h02m`. Compact, for CLI lines, progress lines
 * (elapsed, ETA), error messages and test output, where a line must stay short. `-` for a
 * duration that is unknown or not a duration (negative: a clock that went back; NaN).
 */
export function formatDuration(ms: number | undefined | null): string {
  return written(ms, TERMINAL);
}

/**
 * Pages: `850 ms`, `12.3 s`, `3 min 05 s`, `1 h 02 min`. The same rounding as
 * `formatDuration`, units spelled out for the viewer and the eval report (HTML and Markdown),
 * whose tables have room. `-` for what a record does not say.
 */
export function formatMs(ms: number | undefined | null): string {
  return written(ms, PAGE);
}

/** A number that can be shown as a size or a duration: known, finite, not negative. */
function isQuantity(value: number | undefined | null): value is number {
  return typeof value === 'number' && Number.isFinite(value) && value >= 0;
}

// ---------------------------------------------------------------------------------------
// Money

/**
 * US dollars: `$1.23` from a dollar up, `$0.0123` below (a run often costs cents, and a
 * hundredth of a cent still tells two models apart). `-` for an amount that is unknown.
 */
export function formatUsd(value: number | null | undefined): string {
  if (!isQuantity(value)) return '-';
  return value >= 1 ? `$${value.toFixed(2)}` : `$${value.toFixed(4)}`;
}

/** What a run, a trial or an eval cost as its record keeps it: dollars, and the models without a price. */
export interface CostFacts {
  usd: number;
  /** Models that answered without a price: their calls are counted as $0. */
  unpriced?: readonly string[] | undefined;
}

/**
 * Whether a cost is known at all: `false` when it is $0 only because no model that answered
 * had a price (a replayed cassette, a local model nobody priced). Such a cost is said once as
 * "no price", never shown as a column of `$0.0000`.
 */
export function costKnown(cost: CostFacts | undefined): boolean {
  return cost !== undefined && !(cost.usd === 0 && (cost.unpriced?.length ?? 0) > 0);
}

/**
 * A cost in one phrase: `$0.0123`; `$0.0123 (no price for m)` when some model had none;
 * `no price for m` when none had one (nothing to add up); `-` for a record without a cost.
 */
export function formatCost(cost: CostFacts | undefined): string {
  if (cost === undefined) return '-';
  const unpriced = cost.unpriced ?? [];
  const none = unpriced.length > 0 ? `no price for ${unpriced.join(', ')}` : '';
  if (!costKnown(cost)) return none;
  return none ? `${formatUsd(cost.usd)} (${none})` : formatUsd(cost.usd);
}

// ---------------------------------------------------------------------------------------
// Tables

/**
 * Rows of cells as lines of text, each column padded to its widest cell (`right`: the
 * columns, by index, whose cells are right-aligned, e.g. numbers); a column empty in every
 * row takes no room, and trailing blanks are cut.
 */
export function alignColumns(rows: readonly (readonly string[])[], right: readonly number[] = []): string[] {
  const count = Math.max(0, ...rows.map((r) => r.length));
  const widths = Array.from({ length: count }, (_, i) =>
    Math.max(0, ...rows.map((r) => (r[i] ?? '').length)),
  );
  const shown = widths.flatMap((w, i) => (w > 0 ? [i] : []));
  return rows.map((cells) =>
    shown
      .map((i) => {
        const cell = cells[i] ?? '';
        return right.includes(i) ? cell.padStart(widths[i]!) : cell.padEnd(widths[i]!);
      })
      .join('  ')
      .trimEnd(),
  );
}

/** A plain-text table: a header, a rule, and columns padded to their widest cell. */
export function textTable<K extends string>(rows: Record<K, string>[], columns: K[]): string {
  const widths = columns.map((c) => Math.max(c.length, ...rows.map((r) => r[c].length)));
  return alignColumns([
    columns,
    widths.map((w) => '-'.repeat(w)),
    ...rows.map((r) => columns.map((c) => r[c])),
  ]).join('\n');
}
