import { z } from 'zod';
import { SandboxFileError } from '../../errors.js';
import { ToolError } from '../tool-errors.js';
import { lineNumberAt, listInWords } from './result-text.js';
import { assertEditable, resolveFilePath } from './workspace-path.js';
import { defineTool } from './types.js';

/** Start offsets of every occurrence, overlapping ones included: "aa" in "aaa" is ambiguous. */
export function findOccurrences(text: string, search: string): number[] {
  const found: number[] = [];
  for (let index = text.indexOf(search); index !== -1; index = text.indexOf(search, index + 1))
    found.push(index);
  return found;
}

function bigrams(text: string): Map<string, number> {
  const counts = new Map<string, number>();
  const normalised = text.replace(/\s+/g, ' ').trim();
  for (let i = 0; i < normalised.length - 1; i++) {
    const pair = normalised.slice(i, i + 2);
    counts.set(pair, (counts.get(pair) ?? 0) + 1);
  }
  return counts;
}

/** Dice coefficient over character bigrams: cheap enough for every line of a large file. */
function similarity(a: string, b: string): number {
  if (a.trim() === b.trim()) return 1;
  const x = bigrams(a);
  const y = bigrams(b);
  let sizeX = 0;
  let sizeY = 0;
  let common = 0;
  for (const count of x.values()) sizeX += count;
  for (const [pair, count] of y) {
    sizeY += count;
    common += Math.min(count, x.get(pair) ?? 0);
  }
  return sizeX + sizeY === 0 ? 0 : (2 * common) / (sizeX + sizeY);
}

export interface ClosestLine {
  line: number;
  text: string;
}

/**
 * The file line nearest to what the model was looking for. For a multi-line search the
 * first search line that does not appear verbatim in the file is the one that broke the
 * match, so that is the line compared.
 */
export function closestLine(fileText: string, search: string): ClosestLine | undefined {
  const fileLines = fileText.split('\n');
  const searchLines = search.split('\n').filter((line) => line.trim() !== '');
  if (searchLines.length === 0) return undefined;
  const present = new Set(fileLines);
  const target = searchLines.find((line) => !present.has(line)) ?? searchLines[0] ?? '';
  let best: ClosestLine | undefined;
  let bestScore = 0;
  fileLines.forEach((text, index) => {
    if (text.trim() === '') return;
    const score = similarity(text, target);
    if (score > bestScore) {
      bestScore = score;
      best = { line: index + 1, text };
    }
  });
  return bestScore >= 0.2 ? best : undefined;
}

function shorten(text: string, max = 200): string {
  return text.length > max ? `${text.slice(0, max)}...` : text;
}

export const editFileTool = defineTool({
  name: 'edit_file',
  description:
    'Replace one exact occurrence of `search` in a workspace file with `replacement`. `search` must match exactly once, whitespace included; add surrounding lines to make it unique. Only editable paths may be changed.',
  input: z.object({
    path: z.string().describe('File path relative to /workspace'),
    search: z.string().min(1).describe('Exact text to find; must occur exactly once'),
    replacement: z.string().describe('Text to put in its place'),
  }),
  async run({ path: raw, search, replacement }, { sandbox, editable, limits, signal }) {
    const path = resolveFilePath(raw);
    assertEditable(path, editable);
    let original: string;
    try {
      original = (await sandbox.readFile(path, { maxBytes: limits.maxReadBytes, fast: true })).toString(
        'utf8',
      );
    } catch (error) {
      if (error instanceof SandboxFileError)
        throw new ToolError(error.message, 'use write_file to create a new file');
      throw error;
    }
    const occurrences = findOccurrences(original, search);
    if (occurrences.length === 0) {
      const closest = closestLine(original, search);
      throw new ToolError(
        closest
          ? `search text found 0 times in ${path}; closest line ${closest.line}: ${shorten(closest.text)}`
          : `search text found 0 times in ${path}; no similar line`,
        'copy the text exactly as read_file shows it, whitespace and indentation included',
      );
    }
    if (occurrences.length > 1) {
      const lines = occurrences.map((index) => lineNumberAt(original, index));
      throw new ToolError(
        `search text found ${occurrences.length} times in ${path}, at lines ${listInWords(lines)}; add context so it matches once`,
      );
    }
    const at = occurrences[0] ?? 0;
    // Slicing, not String.replace: `$&` or `$1` in the replacement must stay literal.
    const updated = original.slice(0, at) + replacement + original.slice(at + search.length);
    const bytes = Buffer.byteLength(updated, 'utf8');
    if (bytes > limits.maxWriteBytes) {
      throw new ToolError(
        `the edited file would be ${bytes} bytes, over the ${limits.maxWriteBytes}-byte limit`,
      );
    }
    await sandbox.writeFiles([{ path, content: updated }], { fast: true, ...(signal ? { signal } : {}) });
    return { content: `edited ${path} at line ${lineNumberAt(original, at)}`, isError: false };
  },
});
