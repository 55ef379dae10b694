/**
 * HTML that is safe by type. Every page the harness writes (the eval report, the run and
 * trial viewer) shows data a hostile sandbox, repo or task file may have shaped: file names,
 * tool inputs, command output, task ids, even a run's id. So markup is an `Html` value, made
 * only by the `html` tagged template (or the few helpers built on it), and the template
 * escapes every interpolated value that is not already `Html`. A forgotten escape is a type
 * error where `Html` is required, and still escaped where a string slips into a template.
 *
 * Escaping spells control, bidirectional and invisible characters out as `\u{...}` (they
 * could reorder or hide what a reader sees) and is valid in text, in quoted attribute
 * values and inside SVG; `text()` additionally marks them visibly in text nodes.
 */

const HTML = Symbol('html');

/** Markup. Only this module makes one, so a string can never pass for it. */
export interface Html {
  readonly [HTML]: string;
  toString(): string;
}

class Markup implements Html {
  readonly [HTML]: string;
  constructor(value: string) {
    this[HTML] = value;
  }
  toString(): string {
    return this[HTML];
  }
}

/**
 * What may be interpolated: markup as it is, text and numbers escaped, lists joined without
 * a separator, and nothing for `undefined`, `null` and `false` (so `${cond && html`...`}` reads).
 */
export type HtmlValue = Html | string | number | boolean | null | undefined | readonly HtmlValue[];

export function isHtml(value: unknown): value is Html {
  return value instanceof Markup;
}

// C0 except tab and newline, DEL, C1, zero-width, bidi marks/overrides/isolates, line and
// paragraph separators, word joiners, the byte order mark. Matching them is the point.
// eslint-disable-next-line no-control-regex
const INVISIBLE = /[\u0000-\u0008\u000B-\u001F\u007F-\u009F\u200B-\u200F\u2028-\u202E\u2060-\u2069\uFEFF]/g;
// Colour codes from test runners say nothing once the terminal is gone.
// eslint-disable-next-line no-control-regex
const ANSI_SGR = /\u001b\[[0-9;]*m/g;

function codePoint(char: string): string {
  return `\\u{${(char.codePointAt(0) ?? 0).toString(16).toUpperCase().padStart(4, '0')}}`;
}

function normalise(value: string): string {
  return value.replace(/\r\n/g, '\n').replace(ANSI_SGR, '');
}

/** The five HTML metacharacters as entities: the primitive every other function builds on. */
export function escapeText(value: string): string {
  return value
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/"/g, '&quot;')
    .replace(/'/g, '&#39;');
}

/** The text with colour codes dropped, CRLF normalised and control characters spelled out. */
export function spell(value: string): string {
  return normalise(value).replace(INVISIBLE, codePoint);
}

/** How the template shows a value that is not `Html`. */
function escapeValue(value: string): string {
  return escapeText(spell(value));
}

function render(value: HtmlValue): string {
  if (value === undefined || value === null || value === false) return '';
  if (isHtml(value)) return value[HTML];
  if (Array.isArray(value)) return (value as readonly HtmlValue[]).map(render).join('');
  return escapeValue(String(value));
}

/** The tagged template: literal parts are markup, every value is escaped unless it is `Html`. */
export function html(strings: TemplateStringsArray, ...values: HtmlValue[]): Html {
  let out = strings[0] ?? '';
  values.forEach((value, i) => {
    out += render(value) + (strings[i + 1] ?? '');
  });
  return new Markup(out);
}

/** Parts joined by a separator (itself escaped unless `Html`). */
export function joinHtml(parts: readonly HtmlValue[], separator: HtmlValue = ''): Html {
  const sep = render(separator);
  return new Markup(parts.map(render).join(sep));
}

/**
 * Markup the harness itself wrote as a constant (a stylesheet, a script): never data.
 * Every call is a place to review; keep them few.
 */
export function trustedHtml(constant: string): Html {
  return new Markup(constant);
}

/** Text for an HTML text node: escaped, control characters shown as visible marks. */
export function text(value: string): Html {
  const clean = normalise(value);
  let out = '';
  let last = 0;
  for (const match of clean.matchAll(INVISIBLE)) {
    out += escapeText(clean.slice(last, match.index));
    out += `<span class="ctl" title="control character">${codePoint(match[0])}</span>`;
    last = match.index + match[0].length;
  }
  return new Markup(out + escapeText(clean.slice(last)));
}

/** A whole document as the string written to a file or a response. */
export function documentString(page: Html): string {
  return page[HTML];
}
