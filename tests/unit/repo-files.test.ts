/**
 * `readRepoFile`: the host reads a repo's (or catalog folder's) files only when they are
 * regular files whose real path is inside that folder, and says which link or file broke
 * the rule.
 */
import { execFileSync } from 'node:child_process';
import { link, mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ConfigError, ImageError } from '../../src/errors.js';
import { readRepoFile } from '../../src/repo-files.js';
import { rejection } from '../helpers/rejection.js';

let root: string;
let repo: string;
let outside: string;

const refusal = (promise: Promise<unknown>) => rejection(promise, ConfigError);

beforeEach(async () => {
  root = await mkdtemp(join(tmpdir(), 'sh-repo-files-'));
  repo = join(root, 'repo');
  outside = join(root, 'host-secret');
  await mkdir(join(repo, 'docs'), { recursive: true });
  await writeFile(outside, 'aws_access_key_id = HOST-SECRET-CANARY\n');
  await writeFile(join(repo, 'docs', 'agents.md'), '# Rules of this repo\n');
});

afterEach(async () => {
  await rm(root, { recursive: true, force: true });
});

describe('readRepoFile', () => {
  it('reads a regular file, and a symlink whose target stays inside the folder', async () => {
    await writeFile(join(repo, 'AGENTS.md'), 'be nice\n');
    await symlink('docs/agents.md', join(repo, 'CLAUDE.md'));
    expect((await readRepoFile(repo, 'AGENTS.md', 'AGENTS.md')).toString()).toBe('be nice\n');
    expect((await readRepoFile(repo, 'CLAUDE.md', 'CLAUDE.md')).toString()).toBe('# Rules of this repo\n');
  });

  it('refuses a symlink to a host file, naming the link and its target, without reading it', async () => {
    await symlink(outside, join(repo, 'AGENTS.md'));
    const error = await refusal(readRepoFile(repo, 'AGENTS.md', 'AGENTS.md', { optional: true }));
    expect(error.message).toBe(`AGENTS.md is a symlink to ${outside}, outside the repo (${repo})`);
    expect(error.message).not.toContain('HOST-SECRET-CANARY');
    expect(error.hint).toMatch(/only reads files inside the repo/);
  });

  it('refuses a relative link that climbs out, and one that only escapes through another link', async () => {
    await symlink('../host-secret', join(repo, 'AGENTS.md'));
    expect((await refusal(readRepoFile(repo, 'AGENTS.md', 'AGENTS.md'))).message).toMatch(
      /^AGENTS\.md is a symlink to \.\.\/host-secret, outside the repo/,
    );
    await rm(join(repo, 'AGENTS.md'));
    await symlink(root, join(repo, 'up'));
    await symlink('up/host-secret', join(repo, 'AGENTS.md'));
    // The first link on the way is the one named.
    expect((await refusal(readRepoFile(repo, 'AGENTS.md', 'AGENTS.md'))).message).toMatch(
      /^AGENTS\.md is a symlink to up\/host-secret, which resolves to .*host-secret, outside the repo/,
    );
  });

  it('refuses a folder symlink on the way, naming the folder', async () => {
    const hostFolder = join(root, 'host-folder');
    await mkdir(hostFolder);
    await writeFile(join(hostFolder, 'OPS-1.md'), 'HOST-SECRET-CANARY\n');
    await symlink(hostFolder, join(repo, 'tickets'));
    const error = await refusal(
      readRepoFile(repo, 'tickets/OPS-1.md', 'ticket', { rootName: 'the catalog folder' }),
    );
    expect(error.message).toBe(
      `ticket tickets/OPS-1.md: tickets is a symlink to ${hostFolder}, outside the catalog folder (${repo})`,
    );
  });

  it('refuses a dangling link that points outside even when the file is optional', async () => {
    await symlink(join(root, 'not-there-yet'), join(repo, 'AGENTS.md'));
    await refusal(readRepoFile(repo, 'AGENTS.md', 'AGENTS.md', { optional: true }));
  });

  it('treats a missing file, or a dangling link inside, as absent when optional and as an error otherwise', async () => {
    expect(await readRepoFile(repo, 'AGENTS.md', 'AGENTS.md', { optional: true })).toBeUndefined();
    expect(await readRepoFile(repo, 'nope/AGENTS.md', 'AGENTS.md', { optional: true })).toBeUndefined();
    await symlink('docs/missing.md', join(repo, 'AGENTS.md'));
    expect(await readRepoFile(repo, 'AGENTS.md', 'AGENTS.md', { optional: true })).toBeUndefined();
    expect((await refusal(readRepoFile(repo, 'Dockerfile.sandbox', 'Dockerfile'))).message).toMatch(
      /^Dockerfile Dockerfile\.sandbox does not exist \(looked at .*Dockerfile\.sandbox\)$/,
    );
  });

  it('refuses a path that leaves the folder by itself', async () => {
    expect((await refusal(readRepoFile(repo, '../host-secret', 'ticket'))).message).toMatch(
      /is outside the repo/,
    );
    await refusal(readRepoFile(repo, outside, 'ticket'));
  });

  it('refuses what is not a regular file: a folder, a FIFO (without blocking), a hard link', async () => {
    await mkdir(join(repo, 'AGENTS.md'));
    expect((await refusal(readRepoFile(repo, 'AGENTS.md', 'AGENTS.md'))).message).toBe(
      'AGENTS.md is a folder, not a file',
    );
    execFileSync('mkfifo', [join(repo, 'fifo.md')]);
    expect((await refusal(readRepoFile(repo, 'fifo.md', 'ticket'))).message).toMatch(/not a regular file/);
    await link(outside, join(repo, 'linked.md'));
    expect((await refusal(readRepoFile(repo, 'linked.md', 'ticket'))).message).toMatch(
      /has 2 hard links; another name of the same file may be outside the repo/,
    );
  });

  it('refuses a file larger than the limit', async () => {
    await writeFile(join(repo, 'big.md'), 'x'.repeat(2000));
    expect((await refusal(readRepoFile(repo, 'big.md', 'ticket', { maxBytes: 1000 }))).message).toMatch(
      /is 2000 bytes, more than the 1000/,
    );
  });

  it('throws the error the caller asks for', async () => {
    await symlink(outside, join(repo, '.dockerignore'));
    const error = await rejection(
      readRepoFile(repo, '.dockerignore', '.dockerignore', {
        optional: true,
        error: (message, hint) => new ImageError(message, { hint }),
      }),
      ImageError,
    );
    expect(error.message).toMatch(/^\.dockerignore is a symlink to .*, outside the repo/);
  });
});
