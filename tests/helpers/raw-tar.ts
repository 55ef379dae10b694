/**
 * Hand-made tar archives for tests of the defensive reader: every header field is written
 * as given, so an archive can lie (sizes, names, types) the way no well-behaved packer would.
 */

export interface RawEntry {
  name: string;
  /** Typeflag: '0' file, '1' hard link, '2' symlink, '3' char device, '4' block device, '5' folder, '6' fifo, 'x' pax, 'L' GNU long name. */
  type?: string;
  mode?: number;
  /** The data that follows the header (padded to 512 bytes). */
  data?: Buffer | string;
  /** The size written in the header; default the data's real length. */
  declaredSize?: number | string;
  linkname?: string;
  uid?: number;
  gid?: number;
}

function field(block: Buffer, offset: number, length: number, value: string): void {
  block.write(value.slice(0, length), offset, 'latin1');
}

function octal(value: number, length: number): string {
  return `${value.toString(8).padStart(length - 1, '0')}\0`;
}

export function header(entry: RawEntry): Buffer {
  const block = Buffer.alloc(512);
  const data = Buffer.from(entry.data ?? '');
  const size = entry.declaredSize ?? data.length;
  field(block, 0, 100, entry.name);
  field(block, 100, 8, octal(entry.mode ?? 0o644, 8));
  field(block, 108, 8, octal(entry.uid ?? 1000, 8));
  field(block, 116, 8, octal(entry.gid ?? 1000, 8));
  field(block, 124, 12, typeof size === 'number' ? octal(size, 12) : size);
  field(block, 136, 12, octal(0, 12));
  block.write(entry.type ?? '0', 156, 'latin1');
  field(block, 157, 100, entry.linkname ?? '');
  field(block, 257, 6, 'ustar\0');
  field(block, 263, 2, '00');
  block.fill(' ', 148, 156);
  let sum = 0;
  for (const byte of block) sum += byte;
  field(block, 148, 8, `${sum.toString(8).padStart(6, '0')}\0 `);
  return block;
}

function padded(data: Buffer): Buffer {
  const rest = data.length % 512;
  return rest === 0 ? data : Buffer.concat([data, Buffer.alloc(512 - rest)]);
}

/** Header and padded data of one entry. */
export function member(entry: RawEntry): Buffer {
  return Buffer.concat([header(entry), padded(Buffer.from(entry.data ?? ''))]);
}

/** A pax extended header (`x`) that overrides fields of the member after it. */
export function pax(records: Record<string, string>): Buffer {
  let body = '';
  for (const [key, value] of Object.entries(records)) {
    const text = ` ${key}=${value}\n`;
    let length = text.length + 1;
    while (`${length}${text}`.length !== length) length = `${length}${text}`.length;
    body += `${length}${text}`;
  }
  return member({ name: 'PaxHeader', type: 'x', data: body });
}

/** A GNU long name (`L`) for the member after it. */
export function gnuLongName(name: string): Buffer {
  return member({ name: '././@LongLink', type: 'L', data: `${name}\0` });
}

export const END = Buffer.alloc(1024);

export function archive(...parts: Buffer[]): Buffer {
  return Buffer.concat([...parts, END]);
}
