/**
 * Key-shaped canaries for the host environment of a run: every model key name the harness
 * knows, usual token names, and one variable whose name is itself unique. One random
 * token is in all of them, so a single search finds any of them anywhere.
 */
import { randomBytes } from 'node:crypto';
import { lstat, readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { expect } from 'vitest';
import { cleanEnv } from './cli.js';

export interface Canary {
  /** The token in every canary value (and in one variable name). */
  canary: string;
  /** The canary variables alone. */
  variables: Record<string, string>;
  /** A clean CLI environment plus the canaries (and `extra`). */
  env: NodeJS.ProcessEnv;
}

export function canaryEnv(extra: Record<string, string> = {}): Canary {
  const canary = `canary${randomBytes(12).toString('hex')}`;
  const variables = {
    ANTHROPIC_API_KEY: `sk-ant-api03-${canary}-AA`,
    OPENAI_API_KEY: `sk-proj-${canary}`,
    GITHUB_TOKEN: `ghp_${canary}`,
    NPM_TOKEN: `npm_${canary}`,
    AWS_SECRET_ACCESS_KEY: `${canary}/aws`,
    [`HOST_ONLY_${canary.toUpperCase()}`]: canary,
  };
  return { canary, variables, env: cleanEnv({ ...variables, ...extra }) };
}

async function filesUnder(path: string): Promise<string[]> {
  const info = await lstat(path);
  if (!info.isDirectory()) return info.isFile() ? [path] : [];
  const out: string[] = [];
  for (const name of await readdir(path)) out.push(...(await filesUnder(join(path, name))));
  return out;
}

/**
 * Fails, naming `where` and quoting a little around the hit, when the canary (any letter
 * case) is in `text`; a plain `not.toContain` would print the whole text, often megabytes.
 */
export function expectNoCanaryIn(canary: string, text: string, where: string): void {
  const at = text.toLowerCase().indexOf(canary.toLowerCase());
  const around = at < 0 ? '' : text.slice(Math.max(0, at - 120), at + canary.length + 40);
  expect(at, `the canary is in ${where}: ...${around}...`).toBe(-1);
}

/**
 * Fails naming the file when the canary (any letter case) is in a file under `paths`;
 * returns how many files were read, so callers can tell a clean result from an empty one.
 */
export async function expectNoCanary(canary: string, ...paths: string[]): Promise<number> {
  let read = 0;
  const needle = canary.toLowerCase();
  for (const path of paths) {
    for (const file of await filesUnder(path)) {
      read++;
      expectNoCanaryIn(needle, (await readFile(file)).toString('latin1'), file);
    }
  }
  expect(read, `no file to check under ${paths.join(', ')}`).toBeGreaterThan(0);
  return read;
}
