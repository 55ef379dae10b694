/**
 * Text for a terminal. Much of what the CLI prints came from a sandbox or a repo (patches,
 * test output, file names, build lines, error messages quoting them); an escape sequence in
 * it could hide lines from a reviewer, rewrite the screen or set the clipboard (OSC 52).
 * So every control character but newline and tab is shown as an escape, and so are the
 * invisible characters that reorder text. `--json` output is JSON, exact and already escaped.
 */

// C0 controls but \t and \n, DEL, C1 controls, and the bidi / zero-width format characters.
// eslint-disable-next-line no-control-regex
const UNSAFE = /[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]/g;

export function terminalSafe(text: string): string {
  return text.replace(UNSAFE, (ch) => {
    const code = ch.charCodeAt(0);
    if (ch === '\r') return '\\r';
    if (ch === '\x1b') return '\\e';
    return code <= 0xff ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u{${code.toString(16)}}`;
  });
}
