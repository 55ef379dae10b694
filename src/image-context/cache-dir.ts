import { homedir } from 'node:os';
import { join } from 'node:path';

/** Where logs and locks live: `$XDG_CACHE_HOME/sandbox-harness`, else `~/.cache/sandbox-harness`. */
export function cacheDir(): string {
  const xdg = process.env.XDG_CACHE_HOME;
  return join(xdg && xdg.startsWith('/') ? xdg : join(homedir(), '.cache'), 'sandbox-harness');
}
