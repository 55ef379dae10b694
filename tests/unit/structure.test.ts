/**
 * Rules of the code's shape that a change could break without any behaviour test noticing:
 * one file talks to dockerode, and one file decides how the process exits.
 */
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../helpers/cli.js';

async function sourceFiles(dir = path.join(ROOT, 'src')): Promise<string[]> {
  const out: string[] = [];
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) out.push(...(await sourceFiles(full)));
    else if (entry.name.endsWith('.ts')) out.push(full);
  }
  return out;
}

/** Source files whose code (comments left out) matches `pattern`, relative to the repo. */
async function filesMatching(pattern: RegExp): Promise<string[]> {
  const hits: string[] = [];
  for (const file of await sourceFiles()) {
    const code = (await readFile(file, 'utf8')).replace(/\/\*[\s\S]*?\*\/|^\s*\/\/.*$/gm, '');
    if (pattern.test(code)) hits.push(path.relative(ROOT, file));
  }
  return hits.sort();
}

describe('the shape of the code', () => {
  it('one file imports dockerode', async () => {
    expect(await filesMatching(/from 'dockerode'|import\('dockerode'\)|require\('dockerode'\)/)).toEqual([
      'src/sandbox/docker/engine.ts',
    ]);
  });

  it('only main.ts calls process.exit', async () => {
    expect(await filesMatching(/process\.exit\(/)).toEqual(['src/main.ts']);
  });
});

describe('HTML is safe by type', () => {
  const inView = (file: string) => file.startsWith('src/view/');
  const isReport = (file: string) => /^src\/evals\/report[\w-]*\.ts$/.test(file);

  it('the viewer does not take its escaper or its CSS from the eval report', async () => {
    const hits = await filesMatching(/from '[./]*evals\/report\.js'/);
    expect(hits.filter(inView)).toEqual([]);
  });

  it('no page of the viewer or the report calls the old hand-written escapers', async () => {
    const hits = await filesMatching(/\b(?:escapeHtml|escapeText|attr)\(/);
    expect(hits.filter((f) => inView(f) || isReport(f))).toEqual([]);
  });

  it('markup from a constant (trustedHtml) is made only where the page shell and its CSS live', async () => {
    expect(await filesMatching(/\btrustedHtml\(/)).toEqual([
      'src/evals/report-html.ts',
      'src/html/html.ts',
      'src/view/layout.ts',
    ]);
  });
});
