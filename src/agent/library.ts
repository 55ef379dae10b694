/**
 * Docs and skills on demand. A repo keeps a short AGENTS.md and topic documents beside it;
 * skills are instructions for one kind of task. The system prompt lists both (a line each)
 * and the agent loads one with `read_doc` or `skill` only when it needs it, so the prompt
 * stays small however much the repo documents.
 *
 * What the library holds was read from the pristine image before the first attempt (the
 * caller checks every byte against the image's own hash), so an agent that rewrites a doc in
 * its sandbox changes nothing the tools serve. It is hostile data all the same: counts, sizes
 * and line lengths are capped, and control characters never reach the prompt.
 */
import { parse } from 'yaml';

export interface LibraryDoc {
  /** Workspace-relative path. */
  path: string;
  /** Its first non-empty line (a heading's text), as listed in the prompt. */
  title: string;
  content: string;
}

export interface LibrarySkill {
  name: string;
  /** When it applies, from its front matter: what the prompt lists. */
  description: string;
  /** Its folder, workspace-relative. */
  folder: string;
  /** The SKILL.md body, front matter removed. */
  body: string;
}

export interface Library {
  docs: LibraryDoc[];
  skills: LibrarySkill[];
}

export const LIBRARY_LIMITS = {
  maxDocs: 50,
  maxSkills: 30,
  /** Largest doc or SKILL.md read; a larger one is listed as too large, not cut silently. */
  maxFileBytes: 64 * 1024,
  maxTitleChars: 160,
  maxNameChars: 64,
  maxDescriptionChars: 300,
} as const;

/** Printable text on one line: no control characters, no bidi overrides, bounded. */
// Terminal escape sequences whole (ESC [ ... letter), then any control character left:
// matching control characters is the point of these two.
// eslint-disable-next-line no-control-regex
const ESCAPE_SEQUENCE = /\u001b\[[0-9;?]*[ -/]*[@-~]/g;
// eslint-disable-next-line no-control-regex
const CONTROL_OR_BIDI = /[\u0000-\u001f\u007f-\u009f\u200b-\u200f\u202a-\u202e\u2066-\u2069]+/g;

export function oneLine(text: string, max: number): string {
  const flat = text.replace(ESCAPE_SEQUENCE, '').replace(CONTROL_OR_BIDI, ' ').replace(/\s+/g, ' ').trim();
  return flat.length > max ? `${flat.slice(0, max - 1)}…` : flat;
}

/** The first non-empty line of a document, without Markdown heading marks. */
export function docTitle(content: string): string {
  for (const line of content.split('\n')) {
    const text = line.replace(/^#+\s*/, '').trim();
    if (text !== '') return oneLine(text, LIBRARY_LIMITS.maxTitleChars);
  }
  return '(empty)';
}

export type SkillParse =
  { ok: true; name: string; description: string; body: string } | { ok: false; why: string };

/**
 * A SKILL.md: YAML front matter between `---` lines with `name` and `description` (when the
 * skill applies), then the instructions. Front matter is parsed as data only (no custom tags,
 * a bounded size); a file without it is refused, not guessed at.
 */
export function parseSkill(content: string, folderName: string): SkillParse {
  const match = /^---\r?\n([\s\S]{0,8192}?)\r?\n---\r?\n?/.exec(content);
  if (!match) return { ok: false, why: 'no front matter (--- name: ..., description: ... ---) at the top' };
  let meta: unknown;
  try {
    meta = parse(match[1] ?? '', { customTags: [], maxAliasCount: 0, uniqueKeys: true });
  } catch (error) {
    return {
      ok: false,
      why: `its front matter is not valid YAML (${(error as Error).message.split('\n')[0]})`,
    };
  }
  if (typeof meta !== 'object' || meta === null || Array.isArray(meta))
    return { ok: false, why: 'its front matter is not a mapping' };
  const record = meta as Record<string, unknown>;
  const description = typeof record['description'] === 'string' ? record['description'] : '';
  if (description.trim() === '')
    return { ok: false, why: 'its front matter has no description (when it applies)' };
  const rawName =
    typeof record['name'] === 'string' && record['name'].trim() !== '' ? record['name'] : folderName;
  const name = oneLine(rawName, LIBRARY_LIMITS.maxNameChars);
  if (!/^[\w.-]+$/.test(name))
    return { ok: false, why: `its name ${JSON.stringify(name)} is not a plain name` };
  return {
    ok: true,
    name,
    description: oneLine(description, LIBRARY_LIMITS.maxDescriptionChars),
    body: content.slice(match[0].length),
  };
}

/** The prompt's listing of docs and skills; empty when the library is. */
export function librarySection(library: Library | undefined): string | undefined {
  if (!library || (library.docs.length === 0 && library.skills.length === 0)) return undefined;
  const parts: string[] = [];
  if (library.docs.length > 0) {
    parts.push(
      [
        '## Topic documents',
        "The repository's documentation, one line each. Read one with read_doc when it bears on the ticket; do not read them all up front.",
        ...library.docs.map((doc) => `- ${doc.path}: ${doc.title}`),
      ].join('\n'),
    );
  }
  if (library.skills.length > 0) {
    parts.push(
      [
        '## Skills',
        'Instructions for a kind of task. Load one with the skill tool when its description matches what you are doing.',
        ...library.skills.map((skill) => `- ${skill.name}: ${skill.description}`),
      ].join('\n'),
    );
  }
  return parts.join('\n\n');
}
