/**
 * The root-owned files a sandbox gets before anything runs in it (the catalog, the start
 * marker), as tar entries: every backend places them the same way (the Docker API's archive
 * upload, a CLI's `cp` from stdin), so they are written once here.
 */
import { posix } from 'node:path';
import { UsageError } from '../../errors.js';
import type { TarInput } from '../tar.js';
import { START_MARKER } from '../posix/scripts.js';
import { WORKSPACE, type SandboxSpec } from '../types.js';

/** Root-owned folders and files placed before start: the catalog, the start marker. */
export function injectedFiles(spec: SandboxSpec, marker: string): TarInput[] {
  const entries: TarInput[] = [];
  const seenDirs = new Set<string>();
  const files = [...(spec.files ?? []), { path: START_MARKER, content: marker }];
  for (const file of files) {
    const absolute = posix.normalize(file.path);
    if (!posix.isAbsolute(absolute) || absolute === WORKSPACE || absolute.startsWith(`${WORKSPACE}/`)) {
      throw new UsageError(`injected file ${file.path}: must be an absolute path outside ${WORKSPACE}`);
    }
    // Folders are created root-owned, so the sandbox user cannot replace what is injected.
    const parts = posix.dirname(absolute).split('/').filter(Boolean);
    for (let i = 1; i <= parts.length; i++) {
      const dir = parts.slice(0, i).join('/');
      if (seenDirs.has(dir) || ['etc', 'usr', 'opt', 'var'].includes(dir)) continue;
      seenDirs.add(dir);
      entries.push({ name: `${dir}/`, type: 'directory', mode: 0o755, owner: 'root' });
    }
    entries.push({
      name: absolute.slice(1),
      type: 'file',
      content: Buffer.from(file.content),
      mode: 0o444,
      owner: 'root',
    });
  }
  return entries;
}
