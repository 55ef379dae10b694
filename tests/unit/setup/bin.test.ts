import { readFile, stat } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';

// The global set-up builds dist/ before any test runs (npm run build).
describe('the built CLI', () => {
  it('dist/main.js starts with a node shebang and has the run bit, so `npm link` and ./dist/main.js work', async () => {
    const file = new URL('../../../dist/main.js', import.meta.url);
    expect((await readFile(file, 'utf8')).split('\n')[0]).toBe('#!/usr/bin/env node');
    expect((await stat(file)).mode & 0o111).toBe(0o111);
  });
});
