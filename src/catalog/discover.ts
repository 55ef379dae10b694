import { readdir } from 'node:fs/promises';
import { join, relative, resolve } from 'node:path';
import { UsageError } from '../errors.js';

/** `given`, else the only catalog (*.yaml) in `<cwd>/catalog/` or, failing that, in `cwd`. */
export async function findCatalog(cwd: string, given: string | undefined): Promise<string> {
  if (given) return resolve(cwd, given);
  const candidates: string[] = [];
  for (const dir of [join(cwd, 'catalog'), cwd]) {
    const names = await readdir(dir).catch(() => [] as string[]);
    for (const name of names) {
      if (/\.ya?ml$/.test(name) && !/^(suite|\.|docker-compose|compose)/.test(name))
        candidates.push(join(dir, name));
    }
    if (candidates.length > 0) break;
  }
  if (candidates.length === 1) return candidates[0]!;
  throw new UsageError(
    candidates.length === 0
      ? 'no catalog given and none found in ./catalog/ or here'
      : `several catalogs found, pick one with --catalog: ${candidates.map((c) => relative(cwd, c)).join(', ')}`,
    { hint: 'Pass --catalog <file>; `sandbox-harness catalog validate <file>` checks one.' },
  );
}
