/**
 * Caps text for the model, keeping the head and the (usually more telling) tail, and says
 * how much was cut where, so the model knows the output is incomplete.
 */
export function capText(text: string, maxChars: number, what = 'output'): string {
  if (text.length <= maxChars) return text;
  const headChars = Math.floor(maxChars / 3);
  const tailChars = maxChars - headChars;
  const cut = text.length - headChars - tailChars;
  return `${text.slice(0, headChars)}\n[... ${cut} of ${text.length} characters of ${what} cut here ...]\n${text.slice(text.length - tailChars)}`;
}

export function lineNumberAt(text: string, index: number): number {
  let line = 1;
  for (let i = 0; i < index; i++) if (text.charCodeAt(i) === 10) line++;
  return line;
}

/** "4", "4 and 9", "4, 9 and 12" */
export function listInWords(items: readonly (string | number)[]): string {
  if (items.length <= 1) return items.map(String).join('');
  return `${items.slice(0, -1).join(', ')} and ${String(items[items.length - 1])}`;
}
