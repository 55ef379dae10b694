import { readdir } from 'node:fs/promises';
import { join, relative, resolve } from 'node:path';
import { UsageError } from '../errors.js';

/**
 * The only catalog in `<cwd>/catalog/` or `cwd`, undefined when there is none; several are
 * refused like `findCatalog` refuses them (which one is meant cannot be guessed).
 */
export async function findCatalogIfAny(cwd: string): Promise<string | undefined> {
  try {
    return await findCatalog(cwd, undefined);
  } catch (error) {
    if (error instanceof UsageError && error.message.startsWith('no catalog given')) return undefined;
    throw error;
  }
}

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
