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
