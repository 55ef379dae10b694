/**
 * Catalog `agent.verifierFiles`: a host folder whose files only the baseline and the
 * verification sandboxes get, root-owned and read-only, outside the workspace (Harbor's
 * `tests/`, uploaded after the agent is done). Never in an agent's sandbox, so the agent can
 * neither read nor change them, and they are not part of any change. Read without following
 * a link, regular files and folders only, bounded before anything is read.
 */
import { constants } from 'node:fs';
import { lstat, open, readdir } from 'node:fs/promises';
import path from 'node:path';
import { ConfigError } from '../errors.js';
import type { InjectedFile } from '../sandbox/types.js';

export const VERIFIER_FILE_LIMITS = { maxFiles: 1000, maxBytes: 64 * 1024 * 1024 } as const;

export interface VerifierFilesConfig {
  from: string;
  to: string;
}

/** The files, with their sandbox paths; `catalogFile` anchors a relative `from`. */
export async function loadVerifierFiles(
  catalogFile: string,
  config: VerifierFilesConfig,
  field = 'agent.verifierFiles.from',
): Promise<InjectedFile[]> {
  const root = path.resolve(path.dirname(catalogFile), config.from);
  const where = `${field} of ${catalogFile}`;
  const top = await lstat(root).catch(() => undefined);
  if (!top?.isDirectory())
    throw new ConfigError(`${where}: ${root} is not a folder${top?.isSymbolicLink() ? ' (a symlink)' : ''}`);
  const files: InjectedFile[] = [];
  let bytes = 0;
  const walk = async (dir: string): Promise<void> => {
    for (const entry of (await readdir(dir, { withFileTypes: true })).sort((a, b) =>
      a.name < b.name ? -1 : 1,
    )) {
      const full = path.join(dir, entry.name);
      const rel = path.relative(root, full).split(path.sep).join('/');
      if (entry.isDirectory()) {
        await walk(full);
        continue;
      }
      if (!entry.isFile())
        throw new ConfigError(`${where}: ${rel} is not a regular file (links and devices are refused)`);
      if (files.length >= VERIFIER_FILE_LIMITS.maxFiles)
        throw new ConfigError(`${where}: more than ${VERIFIER_FILE_LIMITS.maxFiles} files`);
      const handle = await open(full, constants.O_RDONLY | constants.O_NOFOLLOW);
      try {
        const size = (await handle.stat()).size;
        bytes += size;
        if (bytes > VERIFIER_FILE_LIMITS.maxBytes)
          throw new ConfigError(`${where}: more than ${VERIFIER_FILE_LIMITS.maxBytes} bytes in all`);
        files.push({ path: path.posix.join(config.to, rel), content: await handle.readFile() });
      } finally {
        await handle.close();
      }
    }
  };
  await walk(root);
  return files;
}

/** Which sandboxes of a run get the verifier's files: the ones whose tests decide or measure. */
export function getsVerifierFiles(role: string): boolean {
  return role === 'baseline' || role.startsWith('verify-');
}
