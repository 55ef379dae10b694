/**
 * Host keys from OpenSSH known_hosts files, so an `ssh://` engine is reached only when it
 * presents a key the user already trusts (what `ssh` itself checks; the ssh library used
 * under dockerode accepts any key unless told otherwise). Plain and hashed (`|1|salt|hmac`)
 * host names, `[host]:port`, `*`/`?` patterns and `!` negations are understood;
 * `@revoked` keys are refused; `@cert-authority` lines are not used (no host certificates).
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import { readFile } from 'node:fs/promises';

export interface KnownHostKey {
  type: string;
  /** The public key blob, as the server sends it. */
  key: Buffer;
  revoked: boolean;
  /** `file:line`, for messages. */
  source: string;
}

/** The name known_hosts uses for a host: `host` on port 22, `[host]:port` otherwise. */
export function knownHostsName(host: string, port: number): string {
  return port === 22 ? host.toLowerCase() : `[${host.toLowerCase()}]:${port}`;
}

export function parseKnownHosts(
  text: string,
  host: string,
  port: number,
  file = 'known_hosts',
): KnownHostKey[] {
  const name = knownHostsName(host, port);
  const keys: KnownHostKey[] = [];
  text.split('\n').forEach((raw, index) => {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) return;
    const fields = line.split(/\s+/);
    let marker: string | undefined;
    if (fields[0]?.startsWith('@')) marker = fields.shift();
    const [hosts, type, blob] = fields;
    if (!hosts || !type || !blob) return;
    if (marker === '@cert-authority') return;
    if (!hostsMatch(hosts, name)) return;
    const key = Buffer.from(blob, 'base64');
    if (key.length === 0) return;
    keys.push({ type, key, revoked: marker === '@revoked', source: `${file}:${index + 1}` });
  });
  return keys;
}

function hostsMatch(field: string, name: string): boolean {
  if (field.startsWith('|1|')) return hashedMatch(field, name);
  let matched = false;
  for (const pattern of field.split(',')) {
    const negated = pattern.startsWith('!');
    const body = (negated ? pattern.slice(1) : pattern).toLowerCase();
    if (!globMatch(body, name)) continue;
    if (negated) return false;
    matched = true;
  }
  return matched;
}

function hashedMatch(field: string, name: string): boolean {
  const [, , salt, hash] = field.split('|');
  if (!salt || !hash) return false;
  const expected = Buffer.from(hash, 'base64');
  const actual = createHmac('sha1', Buffer.from(salt, 'base64')).update(name).digest();
  return expected.length === actual.length && timingSafeEqual(expected, actual);
}

function globMatch(pattern: string, text: string): boolean {
  const regex = pattern
    .replace(/[.+^${}()|[\]\\]/g, '\\$&')
    .replace(/\*/g, '.*')
    .replace(/\?/g, '.');
  return new RegExp(`^${regex}$`).test(text);
}

/** Keys for `host:port` from every readable file (a missing file is no error: it has no keys). */
export async function knownHostKeys(host: string, port: number, files: string[]): Promise<KnownHostKey[]> {
  const keys: KnownHostKey[] = [];
  for (const file of files) {
    const text = await readFile(file, 'utf8').catch(() => undefined);
    if (text !== undefined) keys.push(...parseKnownHosts(text, host, port, file));
  }
  return keys;
}

/** Accepts exactly the keys known_hosts lists for the host and does not revoke. */
export function hostKeyAccepted(keys: readonly KnownHostKey[], presented: Buffer): boolean {
  const same = (k: KnownHostKey) => k.key.length === presented.length && timingSafeEqual(k.key, presented);
  if (keys.some((k) => k.revoked && same(k))) return false;
  return keys.some((k) => !k.revoked && same(k));
}
