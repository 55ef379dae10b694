/**
 * Tolerant reading of records whose shape is still changing and whose content is not
 * trusted: a field of the wrong type reads as absent ("-" on the page), unknown fields are
 * ignored, and nothing here throws on odd input.
 */
export type JsonObject = Record<string, unknown>;

export function asObject(value: unknown): JsonObject | undefined {
  return value !== null && typeof value === 'object' && !Array.isArray(value)
    ? (value as JsonObject)
    : undefined;
}

export function asString(value: unknown): string | undefined {
  return typeof value === 'string' ? value : undefined;
}

export function asNumber(value: unknown): number | undefined {
  return typeof value === 'number' && Number.isFinite(value) ? value : undefined;
}

export function asBoolean(value: unknown): boolean | undefined {
  return typeof value === 'boolean' ? value : undefined;
}

export function asArray(value: unknown): unknown[] {
  return Array.isArray(value) ? value : [];
}

export function asStrings(value: unknown): string[] {
  return asArray(value).filter((v): v is string => typeof v === 'string');
}

export function parseJson(text: string): { ok: true; value: unknown } | { ok: false; error: string } {
  try {
    return { ok: true, value: JSON.parse(text) as unknown };
  } catch (error) {
    return { ok: false, error: (error as Error).message };
  }
}

/** One object per line; torn or foreign lines are counted, not fatal. */
export function parseJsonLines(text: string): { values: JsonObject[]; bad: number } {
  const values: JsonObject[] = [];
  let bad = 0;
  for (const line of text.split('\n')) {
    if (line.trim() === '') continue;
    const parsed = parseJson(line);
    const value = parsed.ok ? asObject(parsed.value) : undefined;
    if (value) values.push(value);
    else bad++;
  }
  return { values, bad };
}

/** A value as readable text: strings as they are, anything else as indented JSON. */
export function showJson(value: unknown): string {
  if (typeof value === 'string') return value;
  try {
    return JSON.stringify(value, null, 2) ?? String(value);
  } catch {
    return String(value);
  }
}
