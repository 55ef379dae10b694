/**
 * What never enters an image: secret-like names (case-insensitive) and contents that look
 * like private keys or provider tokens, found with their line and never echoed back.
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  CleanDigestCache,
  SecretScanner,
  scanForSecrets,
  secretNameReason,
} from '../../../src/image-context/secrets.js';
import { TOKENS } from '../../helpers/fake-secrets.js';

describe('secret-like names', () => {
  it.each([
    ['.env', false],
    ['.ENV', false],
    ['.Env.Production', false],
    ['.envrc', false],
    ['server.PEM', false],
    ['tls.key', false],
    ['store.p12', false],
    ['cert.pfx', false],
    ['release.jks', false],
    ['app.keystore', false],
    ['AuthKey_ABC.p8', false],
    ['id_rsa', false],
    ['ID_ED25519', false],
    ['id_ecdsa.pub', false],
    ['credentials', false],
    ['Credentials.json', false],
    ['terraform.tfvars', false],
    ['prod.tfvars.json', false],
    ['terraform.tfstate', false],
    ['terraform.tfstate.backup', false],
    ['.npmrc', false],
    ['.pypirc', false],
    ['.netrc', false],
    ['.git-credentials', false],
    ['my-gcp-service-account.json', false],
    ['client_secret_123.apps.googleusercontent.com.json', false],
    ['.bash_history', false],
    ['.docker', true],
    ['.kube', true],
    ['.AWS', true],
    ['.azure', true],
    ['.gcloud', true],
    ['.ssh', true],
    ['.gnupg', true],
    ['.git', true],
  ])('%s is never put in an image', (name, isDir) => {
    expect(secretNameReason(name, isDir, 'some/dir')).toMatch(/secret-like name/);
  });

  it('keeps ordinary source files, and matches folder rules on folders only', () => {
    for (const name of ['credentials.ts', 'keys.ts', 'environment.ts', 'README.md', 'docker', 'ssh.js'])
      expect(secretNameReason(name, false, '')).toBeUndefined();
    expect(secretNameReason('.docker', false, '')).toBeUndefined();
    expect(secretNameReason('gcloud', true, 'home/.config')).toMatch(/secret-like/);
    expect(secretNameReason('gcloud', true, 'src')).toBeUndefined();
  });
});

describe('content scan', () => {
  it.each(Object.entries(TOKENS))('finds %s, with its line, and never returns the value', (what, token) => {
    const text = `line one\nline two\nconst value = "${token}";\nline four\n`;
    const hits = scanForSecrets(Buffer.from(text));
    expect(hits).toEqual([{ line: 3, what }]);
    expect(JSON.stringify(hits)).not.toContain(token.slice(8, 30));
  });

  it('finds a private key stored in JSON (a service-account key file)', () => {
    const pem = TOKENS['a private key (PEM block)']!.replace(/\n/g, '\\n');
    const json = `{\n  "type": "service_account",\n  "private_key": "${pem}"\n}\n`;
    expect(scanForSecrets(Buffer.from(json))).toEqual([{ line: 3, what: 'a private key (PEM block)' }]);
  });

  it('ignores documentation placeholders and PEM headers without a key', () => {
    const text = [
      'aws_access_key_id = AKIAIOSFODNN7EXAMPLE',
      'token: ghp_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx',
      'npm_000000000000000000000000000000000000',
      "if (line === '-----BEGIN RSA PRIVATE KEY-----') parse(line);",
      'const prefix = "sk-ant-";',
    ].join('\n');
    expect(scanForSecrets(Buffer.from(text))).toEqual([]);
  });

  it('in dependency folders looks only for provider tokens, not for PEM test keys', () => {
    const testKey = Buffer.from(TOKENS['a private key (PEM block)']!);
    expect(scanForSecrets(testKey, true)).toEqual([]);
    expect(scanForSecrets(testKey, false)).toHaveLength(1);
    const token = Buffer.from(`module.exports = "${TOKENS['a GitHub token']}";\n`);
    expect(scanForSecrets(token, true)).toEqual([{ line: 1, what: 'a GitHub token' }]);
  });

  it('finds a token cut in two by a chunk border, once, with the right line', () => {
    const token = TOKENS['an Anthropic API key']!;
    const text = `${'filler line\n'.repeat(5000)}key=${token}\n${'more\n'.repeat(10)}key=${token}\n`;
    const whole = scanForSecrets(Buffer.from(text));
    expect(whole).toEqual([
      { line: 5001, what: 'an Anthropic API key' },
      { line: 5012, what: 'an Anthropic API key' },
    ]);
    for (const cut of [
      text.indexOf(token) + 10,
      text.indexOf(token) - 3,
      4096,
      text.lastIndexOf(token) + 50,
    ]) {
      const scanner = new SecretScanner();
      const bytes = Buffer.from(text);
      for (let at = 0; at < bytes.length; at += cut)
        scanner.push(bytes.subarray(at, Math.min(at + cut, bytes.length)));
      expect(scanner.hits).toEqual(whole);
    }
  });
});

describe('clean-file cache', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'sh-secret-cache-'));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('remembers clean digests across runs; a digest clean in a dependency folder is not clean elsewhere', async () => {
    const file = join(dir, 'clean.txt');
    const first = await CleanDigestCache.open(file);
    first.add('a'.repeat(64), false);
    first.add('b'.repeat(64), true);
    await first.save();
    const second = await CleanDigestCache.open(file);
    expect(second.has('a'.repeat(64), false)).toBe(true);
    expect(second.has('a'.repeat(64), true)).toBe(true);
    expect(second.has('b'.repeat(64), true)).toBe(true);
    expect(second.has('b'.repeat(64), false)).toBe(false);
    expect(second.has('c'.repeat(64), false)).toBe(false);
    expect((await readFile(file, 'utf8')).trim().split('\n')).toHaveLength(2);
  });
});
