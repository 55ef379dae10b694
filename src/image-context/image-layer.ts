/**
 * A layer of files the harness adds on top of an image (an agent CLI, the relay's Node, their
 * configuration), described without any engine: the files, the folders the layer owns whole,
 * and the key that says when two layers are the same. Every entry is root-owned and never
 * writable by anyone else, so the sandbox user (and the repo's image) can neither change nor
 * replace what it holds; the backend refuses an image that already has an owned folder, and
 * writing a parent folder over a link fails in the engine instead of following it.
 */
import { createReadStream } from 'node:fs';
import { lstat } from 'node:fs/promises';
import { once } from 'node:events';
import { posix } from 'node:path';
import { PassThrough, type Readable } from 'node:stream';
import tar from 'tar-stream';
import { ImageError } from '../errors.js';

export interface LayerFile {
  /** Absolute path in the image, inside one of the layer's owned folders. */
  path: string;
  /** A regular file on the host (never followed through a link), or the bytes themselves. */
  source: { file: string } | { content: Buffer | string };
  /** 0o755 for programs, 0o644 otherwise: the bits for group and others never include write. */
  mode: number;
}

export interface ImageLayer {
  /** What the layer holds, as a stable key (package versions, a hash of its configuration). */
  key: string;
  /** What it is, for labels and messages (`agent claude-code`). */
  description: string;
  /** Absolute folders the layer owns whole: an image that already has one is refused. */
  owns: readonly string[];
  files: readonly LayerFile[];
}

type TarHeader = Parameters<tar.Pack['entry']>[0];

const FIXED_MTIME = new Date(0);
const ROOT = { uid: 0, gid: 0, uname: 'root', gname: 'root', mtime: FIXED_MTIME };

/** Why a layer is malformed (a path outside its owned folders, a writable mode), or undefined. */
export function layerProblem(layer: ImageLayer): string | undefined {
  const clean = (p: string) => posix.isAbsolute(p) && posix.normalize(p) === p && !p.endsWith('/');
  for (const owned of layer.owns) if (!clean(owned) || owned === '/') return `bad owned folder ${owned}`;
  for (const file of layer.files) {
    if (!clean(file.path)) return `bad path ${file.path}`;
    if (!layer.owns.some((owned) => file.path.startsWith(`${owned}/`)))
      return `${file.path} is outside the folders the layer owns`;
    if ((file.mode & 0o022) !== 0 || file.mode > 0o777) return `${file.path}: mode ${file.mode.toString(8)}`;
  }
  return undefined;
}

/** Every folder on the way to each file, parents first (`opt`, `opt/sandbox-harness`, ...). */
function foldersOf(layer: ImageLayer): string[] {
  const folders = new Set<string>();
  for (const file of layer.files) {
    const parts = file.path.slice(1).split('/').slice(0, -1);
    for (let i = 1; i <= parts.length; i++) folders.add(parts.slice(0, i).join('/'));
  }
  return [...folders].sort((a, b) => a.split('/').length - b.split('/').length || (a < b ? -1 : 1));
}

function entryDone(pack: tar.Pack, header: TarHeader, content?: Buffer): Promise<void> {
  return new Promise((resolve, reject) => {
    const callback = (error?: Error | null) => (error ? reject(error) : resolve());
    if (content) pack.entry(header, content, callback);
    else pack.entry(header, callback);
  });
}

/** One host file into the tar; a file that is not the size it was when looked at fails the layer. */
async function streamFile(pack: tar.Pack, header: TarHeader, file: string, size: number): Promise<void> {
  const changed = () => new ImageError(`${file} changed while the agent layer was being made; run again`);
  let settle!: (error?: Error | null) => void;
  const finished = new Promise<void>((resolve, reject) => {
    settle = (error) => (error ? reject(error) : resolve());
  });
  finished.catch(() => undefined);
  const sink = pack.entry({ ...header, size }, (error) => settle(error));
  sink.on('error', () => undefined);
  let seen = 0;
  for await (const chunk of createReadStream(file)) {
    const buf = chunk as Buffer;
    seen += buf.length;
    if (seen > size) throw changed();
    if (!sink.write(buf)) await once(sink, 'drain');
  }
  if (seen !== size) throw changed();
  sink.end(undefined);
  await finished;
}

/**
 * The layer as a tar stream to extract at `/`: every parent folder (root-owned, 0755, so a
 * parent that is a link in the image fails the extraction rather than being followed), then
 * each file. Throws `ImageError` before the first byte when a host file is not a regular file.
 */
export async function layerTar(layer: ImageLayer): Promise<Readable> {
  const problem = layerProblem(layer);
  if (problem) throw new ImageError(`the ${layer.description} layer is malformed: ${problem}`);
  const sizes = new Map<string, number>();
  for (const file of layer.files) {
    if (!('file' in file.source)) continue;
    const info = await lstat(file.source.file).catch(() => undefined);
    if (!info?.isFile()) {
      throw new ImageError(
        `${file.source.file} is not a regular file; the ${layer.description} layer needs it`,
      );
    }
    sizes.set(file.path, info.size);
  }
  const pack = tar.pack();
  const out = new PassThrough();
  pack.pipe(out);
  const write = async () => {
    for (const folder of foldersOf(layer)) {
      await entryDone(pack, { ...ROOT, name: `${folder}/`, type: 'directory', mode: 0o755 });
    }
    for (const file of layer.files) {
      const header: TarHeader = { ...ROOT, name: file.path.slice(1), type: 'file', mode: file.mode };
      if ('file' in file.source) await streamFile(pack, header, file.source.file, sizes.get(file.path)!);
      else await entryDone(pack, header, Buffer.from(file.source.content));
    }
    pack.finalize();
  };
  write().catch((error: unknown) => {
    pack.destroy(error as Error);
    out.destroy(error as Error);
  });
  return out;
}
