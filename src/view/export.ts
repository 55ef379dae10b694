/**
 * `view --export <dir>`: the same pages as static, self-contained files with relative
 * links, to attach to a CI run or open offline. All pages are written into a new temporary
 * folder next to `<dir>` and swapped in by rename, so a failed export leaves the previous one
 * (or nothing) rather than half a site. An existing `<dir>` is replaced only when an earlier
 * export made it (it carries a marker file); a folder of anything else is refused.
 */
import { chmod, lstat, mkdir, mkdtemp, readdir, rename, rm, writeFile } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { UsageError } from '../errors.js';
import { pagePaths, renderPage } from './site.js';
import type { ViewSource } from './source.js';

export const EXPORT_MARKER = '.sandbox-harness-view';

export interface ExportResult {
  dir: string;
  index: string;
  pages: number;
  bytes: number;
  /** The largest page, relative to `dir`. */
  largest: { path: string; bytes: number };
}

async function checkTarget(dir: string): Promise<'absent' | 'replace'> {
  const stats = await lstat(dir).catch(() => undefined);
  if (!stats) return 'absent';
  if (stats.isSymbolicLink() || !stats.isDirectory()) {
    throw new UsageError(`--export: ${dir} exists and is not a folder`, {
      hint: 'Choose a new folder for the export.',
    });
  }
  const entries = await readdir(dir);
  if (entries.length === 0 || entries.includes(EXPORT_MARKER)) return 'replace';
  throw new UsageError(`--export: ${dir} already holds files that an earlier export did not write`, {
    hint: 'Choose a new or empty folder; an earlier export folder is replaced as a whole.',
  });
}

export async function exportView(source: ViewSource, dir: string): Promise<ExportResult> {
  const state = await checkTarget(dir);
  await mkdir(dirname(dir), { recursive: true });
  const temp = await mkdtemp(join(dirname(dir), `.${basename(dir)}.tmp-`));
  try {
    // mkdtemp makes it private; the pages are as readable as the report next to them.
    await chmod(temp, 0o755);
    let bytes = 0;
    let largest = { path: 'index.html', bytes: 0 };
    const paths = await pagePaths(source);
    await mkdir(join(temp, 'runs'));
    for (const path of paths) {
      const html = await renderPage(source, path, new URLSearchParams(), { exported: true });
      if (html === undefined) continue;
      const size = Buffer.byteLength(html, 'utf8');
      bytes += size;
      if (size > largest.bytes) largest = { path, bytes: size };
      // A fresh folder and exclusive creation: nothing here can be a link planted beforehand.
      await writeFile(join(temp, ...path.split('/')), html, { flag: 'wx' });
    }
    await writeFile(
      join(temp, EXPORT_MARKER),
      `${JSON.stringify({ exportedAt: new Date().toISOString(), source: source.root })}\n`,
      { flag: 'wx' },
    );
    if (state === 'replace') {
      const old = `${temp}.old`;
      await rename(dir, old);
      await rename(temp, dir);
      await rm(old, { recursive: true, force: true });
    } else {
      await rename(temp, dir);
    }
    return { dir, index: join(dir, 'index.html'), pages: paths.length, bytes, largest };
  } catch (error) {
    await rm(temp, { recursive: true, force: true });
    throw error;
  }
}
