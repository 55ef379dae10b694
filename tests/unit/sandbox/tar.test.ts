/**
 * The tar reader for what comes out of a sandbox, fed archives no honest packer makes:
 * escaping names (plain, pax `path=`, GNU long names), links, devices, fifos, sizes that
 * lie, truncation, duplicates, members under a link, and more entries than anyone needs.
 * It returns plain files and folders only, refuses the rest with a reason, and throws only
 * for a broken stream, never accepting half of a member.
 */
import { Readable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { packTar, readTarSafely, safeMemberName, type ReadLimits } from '../../../src/sandbox/tar.js';
import { archive, gnuLongName, header, member, pax } from '../../helpers/raw-tar.js';

const LIMITS: ReadLimits = { maxFileBytes: 1024, maxTotalBytes: 4096 };

function read(tar: Buffer, limits: ReadLimits = LIMITS) {
  return readTarSafely(Readable.from([tar]), limits);
}

/** What was accepted, as [name, type, mode, content]. */
function accepted(result: Awaited<ReturnType<typeof read>>) {
  return result.entries.map((e) => [e.name, e.type, e.mode, e.content?.toString('latin1')]);
}

function reasons(result: Awaited<ReturnType<typeof read>>): Record<string, string> {
  return Object.fromEntries(result.refused.map((r) => [r.name, r.reason]));
}

describe('readTarSafely', () => {
  it('accepts plain files and folders with their bytes and permission bits', async () => {
    const result = await read(
      archive(
        member({ name: 'src/', type: '5', mode: 0o755 }),
        member({ name: 'src/app.js', data: 'export {};\n', mode: 0o644 }),
        member({ name: 'run.sh', data: '#!/bin/sh\n', mode: 0o100755 }),
        member({ name: './lib//./util.js', data: 'u', mode: 0o4755 }),
      ),
    );
    expect(result.refused).toEqual([]);
    expect(accepted(result)).toEqual([
      ['src', 'directory', 0o755, undefined],
      ['src/app.js', 'file', 0o644, 'export {};\n'],
      ['run.sh', 'file', 0o755, '#!/bin/sh\n'],
      ['lib/util.js', 'file', 0o4755, 'u'],
    ]);
  });

  it('reads what packTar writes', async () => {
    const tar = await packTar([
      { name: 'a/', type: 'directory', mode: 0o755, owner: 'sandbox' },
      { name: 'a/b.txt', type: 'file', content: Buffer.from('bee'), mode: 0o600, owner: 'root' },
    ]);
    expect(accepted(await read(tar))).toEqual([
      ['a', 'directory', 0o755, undefined],
      ['a/b.txt', 'file', 0o600, 'bee'],
    ]);
  });

  it('refuses names that escape, however they are spelled, and goes on reading', async () => {
    const result = await read(
      archive(
        member({ name: '../evil', data: 'x' }),
        member({ name: 'a/../../evil', data: 'x' }),
        member({ name: '/etc/cron.d/evil', data: 'x' }),
        member({ name: 'a\\..\\..\\evil', data: 'x' }),
        pax({ path: '../../etc/passwd' }),
        member({ name: 'innocent.txt', data: 'x' }),
        pax({ path: '/root/.ssh/authorized_keys' }),
        member({ name: 'innocent2.txt', data: 'x' }),
        gnuLongName(`${'../'.repeat(40)}etc/shadow`),
        member({ name: 'innocent3.txt', data: 'x' }),
        member({ name: 'after.txt', data: 'still read' }),
      ),
    );
    expect(accepted(result)).toEqual([['after.txt', 'file', 0o644, 'still read']]);
    expect(result.refused.map((r) => r.name)).toEqual([
      '../evil',
      'a/../../evil',
      '/etc/cron.d/evil',
      'a\\..\\..\\evil',
      '../../etc/passwd',
      '/root/.ssh/authorized_keys',
      `${'../'.repeat(40)}etc/shadow`,
    ]);
    for (const refusal of result.refused) {
      expect(refusal.kind).toBe('invalid-path');
      expect(refusal.reason).toMatch(/escapes the workspace/);
    }
  });

  it('takes a long name from a pax header or a GNU long-name member', async () => {
    const deep = `${'folder/'.repeat(30)}file.txt`;
    const result = await read(
      archive(
        pax({ path: deep }),
        member({ name: 'short', data: 'pax' }),
        gnuLongName(`gnu/${deep}`),
        member({ name: 'short2', data: 'gnu' }),
      ),
    );
    expect(accepted(result)).toEqual([
      [deep, 'file', 0o644, 'pax'],
      [`gnu/${deep}`, 'file', 0o644, 'gnu'],
    ]);
  });

  it('refuses links, devices, fifos and unknown types, saying what each is', async () => {
    const result = await read(
      archive(
        member({ name: 'sym', type: '2', linkname: '/etc/passwd' }),
        member({ name: 'hard', type: '1', linkname: 'src/app.js' }),
        member({ name: 'chr', type: '3' }),
        member({ name: 'blk', type: '4' }),
        member({ name: 'fifo', type: '6' }),
        member({ name: 'odd', type: 'Q' }),
        member({ name: 'fine.txt', data: 'ok' }),
      ),
    );
    expect(accepted(result)).toEqual([['fine.txt', 'file', 0o644, 'ok']]);
    expect(result.refused.map((r) => r.kind)).toEqual([
      'symlink',
      'hard-link',
      'special-file',
      'special-file',
      'special-file',
      'special-file',
    ]);
    expect(reasons(result)).toEqual({
      sym: 'a symbolic link (pointing to /etc/passwd) is not a regular file',
      hard: 'a hard link (pointing to src/app.js) is not a regular file',
      chr: 'a character device is not a regular file',
      blk: 'a block device is not a regular file',
      fifo: 'a named pipe (fifo) is not a regular file',
      odd: expect.stringMatching(/unknown type.* is not a regular file/),
    });
  });

  it('refuses members inside a link or a file of the same archive', async () => {
    const result = await read(
      archive(
        member({ name: 'etc', type: '2', linkname: '/etc' }),
        member({ name: 'etc/passwd', data: 'root::0:0::/:/bin/sh' }),
        member({ name: 'notes', data: 'a file' }),
        member({ name: 'notes/inside.txt', data: 'x' }),
        member({ name: 'ok/', type: '5', mode: 0o755 }),
        member({ name: 'ok/inside.txt', data: 'fine' }),
      ),
    );
    expect(accepted(result)).toEqual([
      ['notes', 'file', 0o644, 'a file'],
      ['ok', 'directory', 0o755, undefined],
      ['ok/inside.txt', 'file', 0o644, 'fine'],
    ]);
    expect(reasons(result)['etc/passwd']).toMatch(/inside etc, which is not a folder/);
    expect(reasons(result)['notes/inside.txt']).toMatch(/inside notes, which is not a folder/);
  });

  it('refuses a name that appears twice, both times', async () => {
    const result = await read(
      archive(
        member({ name: 'a.txt', data: 'first' }),
        member({ name: 'b.txt', data: 'b' }),
        member({ name: './a.txt', data: 'second' }),
      ),
    );
    expect(accepted(result)).toEqual([['b.txt', 'file', 0o644, 'b']]);
    expect(result.refused).toEqual([
      { name: 'a.txt', kind: 'invalid-path', reason: expect.stringMatching(/more than once/) },
    ]);
  });

  it.each(['', './'])('refuses a file without a name (%j)', async (name) => {
    const result = await read(archive(member({ name, data: 'x' }), member({ name: 'ok', data: 'y' })));
    expect(accepted(result)).toEqual([['ok', 'file', 0o644, 'y']]);
    expect(result.refused).toEqual([{ name, kind: 'invalid-path', reason: 'a file with no name' }]);
  });

  it('holds the per-file and total caps on what arrives, skipping refused data', async () => {
    const result = await read(
      archive(
        member({ name: 'big.bin', data: Buffer.alloc(1025, 1) }),
        member({ name: 'one.bin', data: Buffer.alloc(1024, 2) }),
        member({ name: 'two.bin', data: Buffer.alloc(1024, 3) }),
        member({ name: 'three.bin', data: Buffer.alloc(1024, 4) }),
        member({ name: 'four.bin', data: Buffer.alloc(1024, 5) }),
        member({ name: 'five.bin', data: Buffer.alloc(1, 6) }),
        member({ name: 'empty', data: '' }),
      ),
    );
    expect(result.entries.map((e) => [e.name, e.content?.length])).toEqual([
      ['one.bin', 1024],
      ['two.bin', 1024],
      ['three.bin', 1024],
      ['four.bin', 1024],
      ['empty', 0],
    ]);
    expect(reasons(result)).toEqual({
      'big.bin': '1025 bytes is over the 1024-byte per-file cap',
      'five.bin': 'reading it would pass the 4096-byte total cap',
    });
  });

  it('throws for a header whose size is smaller than its data (the rest is no header)', async () => {
    await expect(
      read(archive(member({ name: 'a.txt', data: 'A'.repeat(600), declaredSize: 10 }))),
    ).rejects.toThrow(/header|corrupt/i);
  });

  it('throws for a header whose size runs past the end of the archive', async () => {
    await expect(
      read(archive(member({ name: 'a.txt', data: 'hi', declaredSize: 0o77777777777 }))),
    ).rejects.toThrow(/end of data/i);
    await expect(
      read(archive(pax({ size: '100000' }), member({ name: 'a.txt', data: 'hi' }))),
    ).rejects.toThrow(/end of data/i);
  });

  it('throws for a size field that is not a number', async () => {
    await expect(
      read(archive(member({ name: 'a.txt', data: 'hi', declaredSize: 'zzzzzzzzzzz\0' }))),
    ).rejects.toThrow(/header/i);
  });

  it('throws for an archive cut in the middle of a member, accepting none of it', async () => {
    const whole = archive(
      member({ name: 'first.txt', data: 'ok' }),
      member({ name: 'cut.txt', data: 'A'.repeat(2000) }),
    );
    await expect(read(whole.subarray(0, 512 + 512 + 512 + 700))).rejects.toThrow(/end of data/i);
    await expect(read(whole.subarray(0, 512 + 512 + 300))).rejects.toThrow(/end of data/i);
  });

  it('throws for bytes that are not a tar archive', async () => {
    await expect(read(Buffer.alloc(2048, 7))).rejects.toThrow(/header/i);
  });

  it('throws when the stream itself fails', async () => {
    const broken = new Readable({
      read() {
        this.destroy(new Error('connection reset by the daemon'));
      },
    });
    await expect(readTarSafely(broken, LIMITS)).rejects.toThrow(/connection reset/);
  });

  it('stops at the entry cap without reading the rest of an endless archive', async () => {
    let produced = 0;
    const endless = new Readable({
      read() {
        produced++;
        this.push(header({ name: `f${produced}`, data: '' }));
      },
    });
    const result = await readTarSafely(endless, { ...LIMITS, maxEntries: 1000 });
    expect(result.entries).toHaveLength(1000);
    expect(result.refused).toEqual([
      {
        name: 'f1001',
        kind: 'over-total',
        reason: 'the archive has more than 1000 entries; this one and the rest were not read',
      },
    ]);
    expect(produced).toBeLessThan(5000);
    expect(endless.destroyed).toBe(true);
  });

  it('has an entry cap by default', async () => {
    let produced = 0;
    const endless = new Readable({
      read() {
        produced++;
        this.push(header({ name: `f${produced}`, type: '5', mode: 0o755 }));
      },
    });
    const result = await readTarSafely(endless, LIMITS);
    expect(result.refused).toHaveLength(1);
    expect(result.refused[0]!.reason).toMatch(/more than \d+ entries/);
  });
});

describe('safeMemberName', () => {
  it.each([
    ['a/b', 'a/b'],
    ['./a//b/./', 'a/b'],
    ['.', '.'],
    ['', '.'],
    ['..', undefined],
    ['a/..', undefined],
    ['/a', undefined],
    ['a\\b', undefined],
    ['a\0b', undefined],
  ])('%j -> %j', (raw, expected) => {
    expect(safeMemberName(raw)).toBe(expected);
  });
});
