import { createHash } from 'node:crypto';
import { mkdir, readdir, readFile, stat, writeFile } from 'node:fs/promises';
import { dirname, join, posix } from 'node:path';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { EXPORT_MARKER, exportView } from '../../../src/view/export.js';
import { openViewSource } from '../../../src/view/source.js';
import { tempDir, writeEval, writeRun } from './fixtures.js';

/** When on, rendering one run's page fails midway through an export (a full disk, a bug). */
const failing = vi.hoisted(() => ({ on: false }));
vi.mock('../../../src/view/site.js', async (importOriginal) => {
  const original = await importOriginal<typeof import('../../../src/view/site.js')>();
  return {
    ...original,
    renderPage: async (...args: Parameters<typeof original.renderPage>) => {
      if (failing.on && args[1].startsWith('runs/gives-up')) throw new Error('rendering failed (test)');
      return original.renderPage(...args);
    },
  };
});

let dir: string;
let remove: () => Promise<void>;
beforeEach(async () => {
  ({ dir, remove } = await tempDir());
  await writeEval(join(dir, 'out'), [
    { taskId: 'fixes', trial: 0, category: 'ready-for-review', runId: 'fixes-t0' },
    { taskId: 'gives-up', trial: 0, category: 'tests-failed', runId: 'gives-up-t0' },
  ]);
  await writeRun(join(dir, 'out', 'runs'), 'fixes-t0', { outcome: 'ready-for-review' });
  await writeRun(join(dir, 'out', 'runs'), 'gives-up-t0');
  await writeRun(join(dir, 'out', 'runs'), 'javascript:alert(1)');
});
afterEach(() => remove());

async function files(root: string, prefix = ''): Promise<string[]> {
  const out: string[] = [];
  for (const entry of await readdir(root, { withFileTypes: true })) {
    const rel = prefix ? `${prefix}/${entry.name}` : entry.name;
    if (entry.isDirectory()) out.push(...(await files(join(root, entry.name), rel)));
    else out.push(rel);
  }
  return out.sort();
}

describe('view --export: static, self-contained pages', () => {
  it('two run folders whose page names would collide get a page each, and the export succeeds', async () => {
    // A folder named after the hashed page name of another ("javascript:alert(1)").
    const hashed = `run-${createHash('sha256').update('javascript:alert(1)').digest('hex').slice(0, 16)}`;
    await writeRun(join(dir, 'out', 'runs'), hashed);
    const target = join(dir, 'out', 'view');
    const result = await exportView(await openViewSource(join(dir, 'out')), target);
    const runs = (await files(target)).filter((f) => f.startsWith('runs/'));
    expect(runs).toHaveLength(4);
    expect(new Set(runs).size).toBe(4);
    expect(result.pages).toBe(6);
  });

  it('writes every page with relative links that all lead to exported files', async () => {
    const target = join(dir, 'out', 'view');
    const result = await exportView(await openViewSource(join(dir, 'out')), target);
    const written = await files(target);
    const hashed = written.find((f) => /^runs\/run-[0-9a-f]{16}\.html$/.test(f));
    expect(written).toEqual(
      [
        EXPORT_MARKER,
        'eval.html',
        'index.html',
        'runs/fixes-t0.html',
        'runs/gives-up-t0.html',
        hashed,
      ].sort(),
    );
    expect(result).toMatchObject({ dir: target, index: join(target, 'index.html'), pages: 5 });
    expect(result.largest.bytes).toBe((await stat(join(target, result.largest.path))).size);

    for (const page of written.filter((f) => f.endsWith('.html'))) {
      const html = await readFile(join(target, page), 'utf8');
      expect(html, page).not.toMatch(/\b(?:src|href|action)="(?:https?:|\/\/|\/|javascript:)/i);
      expect(html, page).not.toMatch(/<link|<img|<iframe|url\(/i);
      expect(html, page).toContain(`<meta http-equiv="Content-Security-Policy" content="default-src 'none';`);
      for (const [, href] of html.matchAll(/href="([^"#]+)(?:#[^"]*)?"/g)) {
        const resolved = posix.normalize(posix.join(posix.dirname(page), href as string));
        expect(written, `${page} links to ${href}`).toContain(resolved);
      }
    }
    const meta = /<meta http-equiv="Content-Security-Policy" content="([^"]+)">/.exec(
      await readFile(join(target, 'index.html'), 'utf8'),
    )?.[1];
    const script =
      /<script>([\s\S]*?)<\/script>/.exec(await readFile(join(target, 'index.html'), 'utf8'))?.[1] ?? '';
    expect(meta).toContain(`script-src 'sha256-${createHash('sha256').update(script).digest('base64')}'`);
  });

  it('replaces an earlier export as a whole', async () => {
    const target = join(dir, 'view');
    const source = await openViewSource(join(dir, 'out'));
    await exportView(source, target);
    await writeFile(join(target, 'runs', 'stale.html'), 'old');
    await exportView(source, target);
    expect(await files(target)).not.toContain('runs/stale.html');
    expect(await readdir(dirname(target))).toEqual(['out', 'view']);
  });

  it('refuses to replace a folder that an export did not write', async () => {
    const target = join(dir, 'mine');
    await mkdir(target);
    await writeFile(join(target, 'notes.txt'), 'keep me');
    await expect(exportView(await openViewSource(join(dir, 'out')), target)).rejects.toThrow(
      /already holds files that an earlier export did not write/,
    );
    expect(await readFile(join(target, 'notes.txt'), 'utf8')).toBe('keep me');
  });

  it('leaves the earlier export and nothing half-written when it fails', async () => {
    const target = join(dir, 'view');
    const source = await openViewSource(join(dir, 'out'));
    await exportView(source, target);
    const before = await files(target);
    failing.on = true;
    try {
      await expect(exportView(source, target)).rejects.toThrow(/rendering failed/);
    } finally {
      failing.on = false;
    }
    expect(await files(target)).toEqual(before);
    expect(await readdir(dirname(target))).toEqual(['out', 'view']);
  });
});
