/**
 * The run's docs and skills (catalog `agent.docs`, `agent.skills`), read once before the
 * first attempt from the pristine image: the paths and hashes come from the image's own tree,
 * the bytes from the host repo are used only when they hash to what the image holds. A file
 * that changed on the host since the build, a link, or anything over the caps is left out
 * with a reason in the record, never read through.
 */
import picomatch from 'picomatch';
import { posix } from 'node:path';
import type { PristineSource } from '../changes/pristine.js';
import { sha256 } from '../changes/hash.js';
import {
  docTitle,
  LIBRARY_LIMITS,
  oneLine,
  parseSkill,
  type Library,
  type LibraryDoc,
  type LibrarySkill,
} from '../agent/library.js';
import type { WorkspaceTree } from '../sandbox/types.js';

export interface LoadedLibrary {
  library: Library;
  /** What was left out, and why (for the run record). */
  skipped: string[];
}

/** Bytes of a pristine file, only when they are the image's own (same sha256). */
async function pristineText(
  path: string,
  tree: WorkspaceTree,
  pristine: PristineSource,
  skipped: string[],
): Promise<string | undefined> {
  const entry = tree.get(path);
  if (!entry || entry.type !== 'file' || entry.sha256 === undefined) {
    skipped.push(`${path}: not a regular file in the image`);
    return undefined;
  }
  if (entry.size > LIBRARY_LIMITS.maxFileBytes) {
    skipped.push(`${path}: ${entry.size} bytes, over the ${LIBRARY_LIMITS.maxFileBytes}-byte limit`);
    return undefined;
  }
  const file = await pristine.read(path).catch(() => undefined);
  if (!file || sha256(file.content) !== entry.sha256) {
    skipped.push(`${path}: the repo's copy differs from the image's (changed since the build)`);
    return undefined;
  }
  if (file.content.includes(0)) {
    skipped.push(`${path}: binary`);
    return undefined;
  }
  return file.content.toString('utf8');
}

export async function loadLibrary(
  tree: WorkspaceTree,
  pristine: PristineSource,
  globs: { docs: readonly string[]; skills: readonly string[] },
): Promise<LoadedLibrary> {
  const skipped: string[] = [];
  const paths = [...tree.keys()].sort();
  const docs: LibraryDoc[] = [];
  if (globs.docs.length > 0) {
    const isDoc = picomatch([...globs.docs], { dot: false });
    const matched = paths.filter((p) => isDoc(p) && tree.get(p)?.type === 'file');
    if (matched.length > LIBRARY_LIMITS.maxDocs)
      skipped.push(
        `${matched.length - LIBRARY_LIMITS.maxDocs} document(s) past the first ${LIBRARY_LIMITS.maxDocs}`,
      );
    for (const path of matched.slice(0, LIBRARY_LIMITS.maxDocs)) {
      const content = await pristineText(path, tree, pristine, skipped);
      if (content !== undefined) docs.push({ path, title: docTitle(content), content });
    }
  }
  const skills: LibrarySkill[] = [];
  if (globs.skills.length > 0) {
    const isSkillFolder = picomatch([...globs.skills], { dot: true });
    const folders = paths.filter((p) => isSkillFolder(p) && tree.get(p)?.type === 'directory');
    for (const folder of folders) {
      if (skills.length >= LIBRARY_LIMITS.maxSkills) {
        skipped.push(`skills past the first ${LIBRARY_LIMITS.maxSkills}`);
        break;
      }
      const file = `${folder}/SKILL.md`;
      if (!tree.has(file)) continue;
      const content = await pristineText(file, tree, pristine, skipped);
      if (content === undefined) continue;
      const parsed = parseSkill(content, posix.basename(folder));
      if (!parsed.ok) {
        skipped.push(`${file}: ${parsed.why}`);
        continue;
      }
      if (skills.some((s) => s.name === parsed.name)) {
        skipped.push(`${file}: another skill is already named ${parsed.name}`);
        continue;
      }
      skills.push({ name: parsed.name, description: parsed.description, folder, body: parsed.body });
    }
  }
  return { library: { docs, skills }, skipped: skipped.map((s) => oneLine(s, 300)) };
}
