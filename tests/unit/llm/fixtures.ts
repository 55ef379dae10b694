import { readFileSync } from 'node:fs';

/** Loads a recorded API response from tests/unit/llm/fixtures. */
export function loadFixture<T>(name: string): T {
  return JSON.parse(readFileSync(new URL(`./fixtures/${name}`, import.meta.url), 'utf8')) as T;
}
