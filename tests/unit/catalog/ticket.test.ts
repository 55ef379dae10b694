import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadTicket, type LoadTicketOptions } from '../../../src/catalog/ticket.js';
import { ConfigError, UsageError } from '../../../src/errors.js';
import { rejection } from '../../helpers/rejection.js';

const fixtureDir = path.resolve('tests/fixtures/catalogs/valid');
let work: string;

const options = (extra: Partial<LoadTicketOptions> = {}): LoadTicketOptions => ({
  catalogDir: fixtureDir,
  repoDir: path.join(fixtureDir, 'repo'),
  readStdin: () => Promise.reject(new Error('stdin must not be read')),
  cwd: work,
  ...extra,
});

async function usageError(promise: Promise<unknown>): Promise<UsageError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(UsageError);
  return error as UsageError;
}

beforeAll(async () => {
  work = await mkdtemp(path.join(tmpdir(), 'tickets-'));
  await mkdir(path.join(work, 'notes'));
  await writeFile(
    path.join(work, 'notes', 'bug.md'),
    '---\nid: SHIP-99\ntitle: Express fee applied twice\nlabels: [checkout]\n---\n\nThe express fee is added twice.\n',
  );
  await writeFile(
    path.join(work, 'plain.md'),
    '# Weight limit ignored\r\n\r\nParcels over 30 kg are accepted.\r\n',
  );
  await writeFile(path.join(work, 'empty.md'), '---\nid: E-1\ntitle: nothing here\n---\n\n   \n');
  await writeFile(path.join(work, 'bad-front.md'), '---\nid: E-2\ntitle: [a, b]\n---\nbody\n');
});

afterAll(async () => {
  await rm(work, { recursive: true, force: true });
});

describe('loadTicket', () => {
  it('reads a markdown file, taking id and title from its front matter and dropping it from the body', async () => {
    const ticket = await loadTicket('notes/bug.md', options());
    expect(ticket).toEqual({
      id: 'SHIP-99',
      title: 'Express fee applied twice',
      body: 'The express fee is added twice.',
      source: 'file',
      file: path.join(work, 'notes', 'bug.md'),
    });
  });

  it('without front matter, takes the id from the file name and the title from the first line', async () => {
    const ticket = await loadTicket('plain.md', options());
    expect(ticket.id).toBe('plain');
    expect(ticket.title).toBe('Weight limit ignored');
    expect(ticket.body).toBe('# Weight limit ignored\n\nParcels over 30 kg are accepted.');
  });

  it('finds an id as tickets/<id>.md beside the catalog first', async () => {
    const ticket = await loadTicket('SHIP-7', options());
    expect(ticket).toMatchObject({
      id: 'SHIP-7',
      title: 'Delivery estimates ignore weekends.',
      source: 'id',
    });
    expect(ticket.file).toBe(path.join(fixtureDir, 'tickets', 'SHIP-7.md'));
  });

  it('finds an id as tickets/<id>.md in the repo when it is not beside the catalog', async () => {
    const ticket = await loadTicket('SHIP-12', options());
    expect(ticket).toMatchObject({
      id: 'SHIP-12',
      title: 'Orders of exactly 50 EUR are charged shipping',
      source: 'id',
      file: path.join(fixtureDir, 'repo', 'tickets', 'SHIP-12.md'),
    });
  });

  it('takes text with whitespace as an inline ticket with a stable derived id', async () => {
    const a = await loadTicket('Free shipping threshold is off by one', options());
    const b = await loadTicket('Free shipping threshold is off by one', options());
    expect(a).toMatchObject({ title: 'Free shipping threshold is off by one', source: 'inline' });
    expect(a.id).toMatch(/^inline-[0-9a-f]{8}$/);
    expect(b.id).toBe(a.id);
    expect(a).not.toHaveProperty('file');
  });

  it('reads "-" from stdin, front matter included', async () => {
    const ticket = await loadTicket(
      '-',
      options({ readStdin: () => Promise.resolve('---\nid: 42\n---\nFix the rounding of fees.\n') }),
    );
    expect(ticket).toEqual({
      id: '42',
      title: 'Fix the rounding of fees.',
      body: 'Fix the rounding of fees.',
      source: 'stdin',
    });
  });

  it('refuses a ticket that is empty after its front matter', async () => {
    const error = await usageError(loadTicket('empty.md', options()));
    expect(error.message).toBe('the ticket in empty.md is empty (nothing after the front matter)');
  });

  it('refuses empty stdin and an empty argument', async () => {
    await usageError(loadTicket('-', options({ readStdin: () => Promise.resolve('  \n') })));
    await usageError(loadTicket('  ', options()));
  });

  it('says where it looked for an id that is not found', async () => {
    const error = await usageError(loadTicket('SHIP-404', options()));
    expect(error.message).toContain(path.join(work, 'SHIP-404'));
    expect(error.message).toContain(path.join(fixtureDir, 'tickets', 'SHIP-404.md'));
    expect(error.message).toContain(path.join(fixtureDir, 'repo', 'tickets', 'SHIP-404.md'));
  });

  it('refuses a file path that does not exist instead of sending the path to the model as text', async () => {
    const error = await usageError(loadTicket('notes/missing.md', options()));
    expect(error.message).toBe(
      `ticket file not found: notes/missing.md (looked at ${path.join(work, 'notes', 'missing.md')})`,
    );
  });

  it('does not let an id reach outside the tickets folders', async () => {
    const error = await usageError(loadTicket('../repo/package', options()));
    expect(error.message).toMatch(/^ticket file not found/);
  });

  it('reports bad front matter with the line of the file', async () => {
    const error = await loadTicket('bad-front.md', options()).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).problems).toEqual([
      'bad-front.md:3:8 title: expected a one-line title, got a list of 2',
    ]);
  });
});

describe('loadTicket: tickets in the repo or the catalog folder stay there', () => {
  let base: string;
  let catalogDir: string;
  let repoDir: string;
  let hostSecret: string;
  const local = (): LoadTicketOptions => ({
    catalogDir,
    repoDir,
    readStdin: () => Promise.reject(new Error('stdin must not be read')),
    cwd: repoDir,
  });
  async function refused(promise: Promise<unknown>): Promise<ConfigError> {
    const error = await rejection(promise, ConfigError);
    expect(error.message).not.toContain('HOST-SECRET');
    return error;
  }

  beforeAll(async () => {
    base = await mkdtemp(path.join(tmpdir(), 'tickets-links-'));
    catalogDir = path.join(base, 'catalog');
    repoDir = path.join(base, 'repo');
    hostSecret = path.join(base, 'host-secret.md');
    await mkdir(path.join(catalogDir, 'tickets'), { recursive: true });
    await mkdir(path.join(repoDir, 'tickets'), { recursive: true });
    await writeFile(hostSecret, 'HOST-SECRET: aws_secret_access_key\n');
    await mkdir(path.join(base, 'host-dir'));
    await writeFile(path.join(base, 'host-dir', 'OPS-2.md'), 'HOST-SECRET\n');
    await symlink(hostSecret, path.join(catalogDir, 'tickets', 'OPS-1.md'));
    await symlink(hostSecret, path.join(repoDir, 'tickets', 'OPS-3.md'));
    await symlink(path.join(base, 'host-dir'), path.join(repoDir, 'notes'));
    await writeFile(path.join(repoDir, 'tickets', 'real.md'), 'Fix the fee.\n');
    await symlink('real.md', path.join(repoDir, 'tickets', 'OPS-4.md'));
  });

  afterAll(async () => {
    await rm(base, { recursive: true, force: true });
  });

  it('refuses an id whose ticket beside the catalog is a symlink to a host file', async () => {
    const error = await refused(loadTicket('OPS-1', local()));
    expect(error.message).toBe(
      `ticket tickets/OPS-1.md is a symlink to ${hostSecret}, outside the catalog folder (${catalogDir})`,
    );
  });

  it('refuses an id whose ticket in the repo is a symlink to a host file', async () => {
    const error = await refused(loadTicket('OPS-3', local()));
    expect(error.message).toMatch(
      /^ticket tickets\/OPS-3\.md is a symlink to .*host-secret\.md, outside the repo/,
    );
  });

  it('refuses a file path in the repo that goes through a folder symlink', async () => {
    const error = await refused(loadTicket('notes/OPS-2.md', local()));
    expect(error.message).toMatch(
      /^ticket notes\/OPS-2\.md: notes is a symlink to .*host-dir, outside the repo/,
    );
  });

  it('follows a link that stays inside the folder', async () => {
    expect((await loadTicket('OPS-4', local())).body).toBe('Fix the fee.');
  });

  it('reads a file the user names outside both folders as it is', async () => {
    const ticket = await loadTicket(hostSecret, local());
    expect(ticket.body).toContain('HOST-SECRET');
  });
});
