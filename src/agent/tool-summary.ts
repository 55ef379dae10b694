/**
 * What a tool call was about, in one short line: the command it ran, the path it read or
 * wrote, the pattern it searched for. The event log, `logs`, the progress line and the viewer
 * all show this same line, so a reader of any of them sees which file or command a call used
 * without the whole conversation (`logs --verbose`).
 *
 * The text is the model's: whitespace (newlines, tabs, carriage returns) becomes one space so
 * a call stays one line, and it is cut. It is not escaped here: each medium escapes it for
 * itself (the terminal shows control characters as escapes, the viewer as HTML text, the
 * event log as JSON).
 */

/** Longest summary a call gets (the transcript keeps the whole input). */
export const TOOL_INPUT_CHARS = 160;

/** One line, cut to `max` characters with an ellipsis. */
export function oneLine(text: string, max = TOOL_INPUT_CHARS): string {
  const line = text.replace(/\s+/g, ' ').trim();
  return line.length > max ? `${line.slice(0, max - 1)}…` : line;
}

/**
 * The call's input in one line, or undefined when it names nothing worth showing (an input
 * that is not an object, fields of the wrong type).
 */
export function toolInputSummary(tool: string, input: unknown): string | undefined {
  if (typeof input !== 'object' || input === null || Array.isArray(input)) return undefined;
  const fields = input as Record<string, unknown>;
  const field = (key: string): string | undefined => {
    const value = fields[key];
    return typeof value === 'string' && value.trim() !== '' ? value : undefined;
  };
  const path = field('path');
  const pattern = field('pattern');
  const shown = (() => {
    switch (tool) {
      case 'search':
        // grep's pattern first: it is what was looked for; the folder only narrows it.
        return pattern === undefined ? path : `${pattern}${path ? ` in ${path}` : ''}`;
      case 'list_files':
        return [path ?? (pattern ? '.' : undefined), pattern].filter(Boolean).join(' ') || undefined;
      default:
        return field('command') ?? path ?? field('task') ?? field('name') ?? field('verdict') ?? pattern;
    }
  })();
  return shown === undefined ? undefined : oneLine(shown);
}
