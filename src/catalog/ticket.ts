/**
 * What `fix <ticket>` was asked to do. A ticket argument is, in this order: `-` (stdin), an
 * existing file, an id found as `tickets/<id>.md` beside the catalog or in the repo, or
 * inline text (anything with whitespace in it). Anything else is a mistake worth naming,
 * not a one-word ticket: `fix SHIP-12` with a typo must not send "SHIP-21" to the model.
 *
 * A ticket inside the repo or the catalog folder goes to the model, so it is read like
 * every file of those folders: a regular file whose real path stays inside
 * (`tickets/OPS-1.md -> ~/.aws/credentials` is refused).
 */
import { createHash } from 'node:crypto';
import { readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import { UsageError } from '../errors.js';
import { isInside, readRepoFile } from '../repo-files.js';
import { parseYamlWithSchema } from '../yaml-validate.js';

export type TicketSource = 'file' | 'id' | 'inline' | 'stdin';

export interface Ticket {
  id: string;
  title: string;
  /** The markdown body without front matter. */
  body: string;
  source: TicketSource;
  /** Absolute path, when the ticket came from a file. */
  file?: string;
}

export interface LoadTicketOptions {
  /** Folder of the catalog file; `tickets/<id>.md` is looked up here first. */
  catalogDir: string;
  /** The service repo; `tickets/<id>.md` is looked up here second. */
  repoDir: string;
  readStdin: () => Promise<string>;
  /** Base for relative file paths; default `process.cwd()`. */
  cwd?: string;
}

const TICKET_ID = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;

// Trackers export many more fields (labels, assignee); only id and title mean something here.
const frontMatterSchema = z.looseObject({
  id: z
    .union([z.string().regex(TICKET_ID), z.int().nonnegative()], {
      error: 'expected a ticket id of letters, digits, ".", "_" or "-"',
    })
    .optional(),
  title: z.string({ error: 'expected a one-line title' }).optional(),
});

export async function loadTicket(arg: string, options: LoadTicketOptions): Promise<Ticket> {
  const cwd = options.cwd ?? process.cwd();

  if (arg === '-') {
    const text = await options.readStdin();
    return parseTicket(text, { source: 'stdin', where: 'standard input' });
  }
  if (arg.trim() === '') throw new UsageError('the ticket is empty', { hint: TICKET_HINT });

  const asFile = path.resolve(cwd, arg);
  const direct = await fileKind(asFile);
  if (direct === 'file') return fromFile(asFile, 'file', arg, options);
  if (direct === 'directory')
    throw new UsageError(`ticket ${arg} is a folder, not a file`, { hint: TICKET_HINT });

  if (TICKET_ID.test(arg)) {
    const candidates = [
      path.join(options.catalogDir, 'tickets', `${arg}.md`),
      path.join(options.repoDir, 'tickets', `${arg}.md`),
    ];
    for (const candidate of candidates) {
      const ticket = await fromFile(candidate, 'id', candidate, options, arg);
      if (ticket) return ticket;
    }
    throw new UsageError(`no ticket "${arg}": looked for ${[asFile, ...candidates].join(', ')}`, {
      hint: TICKET_HINT,
    });
  }

  if (/\s/.test(arg)) return parseTicket(arg, { source: 'inline', where: 'the inline ticket text' });

  throw new UsageError(`ticket file not found: ${arg} (looked at ${asFile})`, { hint: TICKET_HINT });
}

const TICKET_HINT =
  'pass a markdown file, an id with a tickets/<id>.md beside the catalog or in the repo, quoted text, or - for stdin';

async function fromFile(
  file: string,
  source: 'file',
  shown: string,
  options: LoadTicketOptions,
): Promise<Ticket>;
async function fromFile(
  file: string,
  source: 'id',
  shown: string,
  options: LoadTicketOptions,
  id: string,
): Promise<Ticket | undefined>;
/** The ticket in `file`; for an id lookup, undefined when there is no such file. */
async function fromFile(
  file: string,
  source: 'file' | 'id',
  shown: string,
  options: LoadTicketOptions,
  id?: string,
): Promise<Ticket | undefined> {
  const text = await readTicketFile(file, shown, options, source === 'id');
  if (text === undefined) return undefined;
  const ticket = parseTicket(text, { source, where: shown, file, defaultId: id ?? idFromFile(file) });
  return { ...ticket, file };
}

async function readTicketFile(
  file: string,
  shown: string,
  options: LoadTicketOptions,
  optional: boolean,
): Promise<string | undefined> {
  // The innermost folder first: a repo inside the catalog folder keeps its own boundary.
  const folders: [string, string][] = [
    [options.repoDir, 'the repo'],
    [options.catalogDir, 'the catalog folder'],
  ];
  for (const [root, rootName] of folders) {
    if (!isInside(path.resolve(root), file)) continue;
    const bytes = await readRepoFile(root, path.relative(path.resolve(root), file), 'ticket', {
      rootName,
      optional,
    });
    return bytes?.toString('utf8');
  }
  // A file the user named outside both folders is theirs to point at.
  try {
    return await readFile(file, 'utf8');
  } catch (error) {
    throw new UsageError(`cannot read ticket ${shown}: ${(error as Error).message}`, { cause: error });
  }
}

interface ParseContext {
  source: TicketSource;
  /** How the ticket is named in messages. */
  where: string;
  file?: string;
  defaultId?: string;
}

/** Splits optional front matter from the body and fills in id and title. */
export function parseTicket(rawText: string, context: ParseContext): Ticket {
  const text = rawText.replace(/^\uFEFF/, '').replace(/\r\n?/g, '\n');
  let body = text;
  let meta: z.output<typeof frontMatterSchema> = {};

  const match = /^---[ \t]*\n([\s\S]*?)\n?^(?:---|\.\.\.)[ \t]*$\n?/m.exec(text);
  if (text.startsWith('---') && match && match.index === 0) {
    const yaml = match[1] ?? '';
    if (yaml.trim() !== '') {
      // A leading newline keeps YAML line numbers equal to the file's (line 1 is the `---`).
      meta = parseYamlWithSchema(context.file ?? context.where, `\n${yaml}`, frontMatterSchema, {
        displayPath: context.where,
      });
    }
    body = text.slice(match[0].length);
  }

  body = body.trim();
  if (body === '') {
    throw new UsageError(`the ticket in ${context.where} is empty (nothing after the front matter)`, {
      hint: 'write what is wrong and what should happen instead',
    });
  }

  const id =
    meta.id !== undefined ? String(meta.id) : (context.defaultId ?? `${context.source}-${shortHash(body)}`);
  const title = meta.title?.trim() || titleFromBody(body);
  return context.file === undefined
    ? { id, title, body, source: context.source }
    : { id, title, body, source: context.source, file: context.file };
}

/**
 * A ticket as a heading: `OPS-412: Free shipping ...`. A title taken from a body that starts
 * `# OPS-412: Free shipping` already names the id, so it is not said twice.
 */
export function ticketHeading(ticket: { id?: string | undefined; title?: string | undefined }): string {
  const id = ticket.id?.trim() ?? '';
  const title = ticket.title?.trim() ?? '';
  if (id === '') return title;
  if (title === '') return id;
  const rest = title.slice(id.length);
  const namesId =
    title.toLowerCase().startsWith(id.toLowerCase()) && (rest === '' || /^[\s:.,\-–—]/.test(rest));
  return namesId ? title : `${id}: ${title}`;
}

function titleFromBody(body: string): string {
  const first = body.split('\n').find((line) => line.trim() !== '') ?? '';
  const title = first.replace(/^#+\s*/, '').trim();
  return title.length > 80 ? `${title.slice(0, 77)}...` : title;
}

function idFromFile(file: string): string {
  return path.basename(file).replace(/\.(md|markdown|txt)$/i, '');
}

function shortHash(text: string): string {
  return createHash('sha256').update(text).digest('hex').slice(0, 8);
}

async function fileKind(file: string): Promise<'file' | 'directory' | 'missing'> {
  try {
    const info = await stat(file);
    return info.isDirectory() ? 'directory' : 'file';
  } catch {
    return 'missing';
  }
}
