/**
 * The documentation as tests read it: README.md and every .md under docs/, split into fenced
 * blocks with the `<!-- doc-test: ... -->` directives written above them. What the directives
 * mean (the convention every page follows; docs/development.md says it for authors):
 *
 * - A ```bash (or sh, shell) block is run: each command in order, in the page's own fresh copy
 *   of the checkout, each by itself (`bash -c`, from the copy's root: a `cd` or a variable does
 *   not carry to the next line). A command is expected to exit 0, or N when its comment starts
 *   `# exit N`. Lines ending in `\` continue; comment-only lines are skipped.
 * - Any other fenced block whose first line is `# <relative path>` (or `// <relative path>`) is
 *   a file: it is written there, as shown, before the blocks after it run.
 * - Directives on the lines before a block (only blank lines may come between):
 *   - `needs <reason>[: why]`: not run. `reason` is one of NEEDS. Still checked: the shell
 *     syntax, and every sandbox-harness command parses (subcommand, flags, arguments).
 *     A `live-model` or `second-machine` block has a run block beside it (the nearest bash
 *     block before or after it in the same section): the offline equivalent.
 *   - `run-by <file>`: run by that test file (which must exist and name this page).
 *   - `recipe <name>` and `recipe <name> teardown`: a second engine or service the docs ask a
 *     user to start; run as written by tests/e2e/docs-recipes.test.ts, which checks the main
 *     engine is left exactly as it was. The teardown blocks always run.
 *   - `"<command start>" prints /regex/flags`: the output (stdout and stderr) of the block's
 *     first command that starts with that text must match.
 */
import { readdir, readFile } from 'node:fs/promises';
import { join, relative, sep } from 'node:path';

export const NEEDS = ['live-model', 'root', 'second-machine', 'cluster', 'network', 'long-run'] as const;
export type Need = (typeof NEEDS)[number];

export const SHELL_LANGS = new Set(['bash', 'sh', 'shell']);

export interface DocCommand {
  /** Line of the page where the command starts (1-based). */
  line: number;
  /** The command as bash gets it (continuation lines kept, with their backslash-newline). */
  text: string;
  /** The command's trailing comment, without the `#`. */
  comment?: string;
  expectExit: number;
}

export interface Prints {
  prefix: string;
  pattern: RegExp;
}

export interface DocBlock {
  page: string;
  /** Line of the opening fence (1-based). */
  line: number;
  lang: string;
  body: string;
  /** The heading the block is under ('' before the first heading). */
  section: string;
  needs?: { reason: Need; why: string };
  runBy?: string;
  recipe?: { name: string; teardown: boolean };
  prints: Prints[];
  /** Shell blocks: the commands. */
  commands: DocCommand[];
  /** File blocks: where the block is written, relative to the copy's root. */
  file?: string;
}

export interface DocPage {
  path: string;
  text: string;
  blocks: DocBlock[];
  /** Everything wrong with the page's blocks and directives, as `page:line: message`. */
  problems: string[];
}

export type BlockRole = 'run' | 'needs' | 'run-by' | 'recipe' | 'file' | 'text';

export function roleOf(block: DocBlock): BlockRole {
  if (SHELL_LANGS.has(block.lang)) {
    if (block.needs) return 'needs';
    if (block.runBy) return 'run-by';
    if (block.recipe) return 'recipe';
    return 'run';
  }
  return block.file ? 'file' : 'text';
}

/**
 * README.md and every .md under docs/ (subfolders too) of a checkout, README first, then the
 * docs by path: a page another branch adds is a page here with nothing to register.
 */
export async function docPagePaths(root: string): Promise<string[]> {
  const docs = (await readdir(join(root, 'docs'), { recursive: true, withFileTypes: true }).catch(() => []))
    .filter((entry) => entry.isFile() && entry.name.endsWith('.md'))
    .map((entry) => relative(root, join(entry.parentPath, entry.name)).split(sep).join('/'))
    .sort();
  return ['README.md', ...docs];
}

export async function readDocPages(root: string): Promise<DocPage[]> {
  const pages: DocPage[] = [];
  for (const path of await docPagePaths(root))
    pages.push(parseDocPage(path, await readFile(join(root, path), 'utf8')));
  return pages;
}

const DIRECTIVE = /^<!--\s*doc-test:\s*([\s\S]*?)\s*-->\s*$/;
const FILE_PATH =
  /^(?:#|\/\/) ((?:[\w@+-][\w.@+-]*\/)*[\w@+-][\w.@+-]*\.[\w-]+|(?:[\w@+-][\w.@+-]*\/)*(?:Dockerfile[\w.-]*|Makefile))$/;

/** Splits a page into blocks; every problem found goes into `problems`, nothing throws. */
export function parseDocPage(path: string, text: string): DocPage {
  const lines = text.split('\n');
  const blocks: DocBlock[] = [];
  const problems: string[] = [];
  const problem = (line: number, message: string): void => {
    problems.push(`${path}:${line}: ${message}`);
  };
  let section = '';
  let pending: { line: number; text: string }[] = [];
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    const fence = /^(`{3,}|~{3,})\s*([\w+-]*)\s*$/.exec(line);
    if (fence) {
      const marker = fence[1]!;
      const start = i;
      let end = i + 1;
      while (end < lines.length && !lines[end]!.startsWith(marker)) end++;
      if (end >= lines.length) problem(start + 1, 'a fenced block that never closes');
      const body = lines.slice(start + 1, end).join('\n');
      blocks.push(makeBlock(path, start + 1, fence[2]!.toLowerCase(), body, section, pending, problem));
      pending = [];
      i = end;
      continue;
    }
    const heading = /^#{1,6}\s+(.*)$/.exec(line);
    if (heading) section = heading[1]!.trim();
    const directive = DIRECTIVE.exec(line.trim());
    if (directive) {
      pending.push({ line: i + 1, text: directive[1]! });
      continue;
    }
    if (/<!--\s*doc-test/.test(line.replace(/`[^`]*`/g, '')))
      problem(i + 1, 'a doc-test directive must be a whole line: <!-- doc-test: ... -->');
    if (line.trim() !== '' && pending.length > 0) {
      problem(
        pending[0]!.line,
        'a doc-test directive must come right before a fenced block (only blank lines between)',
      );
      pending = [];
    }
  }
  for (const d of pending) problem(d.line, 'a doc-test directive at the end of the page, before no block');
  return { path, text, blocks, problems };
}

function makeBlock(
  page: string,
  line: number,
  lang: string,
  body: string,
  section: string,
  directives: { line: number; text: string }[],
  problem: (line: number, message: string) => void,
): DocBlock {
  const block: DocBlock = { page, line, lang, body, section, prints: [], commands: [] };
  const shell = SHELL_LANGS.has(lang);
  for (const d of directives) {
    const needs = /^needs\s+([\w-]+)\s*(?::\s*([\s\S]*))?$/.exec(d.text);
    const runBy = /^run-by\s+(\S+)$/.exec(d.text);
    const recipe = /^recipe\s+([\w-]+)(\s+teardown)?$/.exec(d.text);
    const prints = /^"([^"]+)"\s+prints\s+\/(.+)\/([a-z]*)$/.exec(d.text);
    if (needs) {
      if (!(NEEDS as readonly string[]).includes(needs[1]!))
        problem(d.line, `unknown need "${needs[1]}": one of ${NEEDS.join(', ')}`);
      else block.needs = { reason: needs[1] as Need, why: needs[2]?.trim() ?? '' };
    } else if (runBy) block.runBy = runBy[1]!;
    else if (recipe) block.recipe = { name: recipe[1]!, teardown: Boolean(recipe[2]) };
    else if (prints) {
      try {
        block.prints.push({ prefix: prints[1]!, pattern: new RegExp(prints[2]!, prints[3]) });
      } catch (error) {
        problem(d.line, `"prints" has an invalid regular expression: ${String(error)}`);
      }
    } else
      problem(
        d.line,
        `unknown doc-test directive "${d.text}" (needs <reason>, run-by <file>, recipe <name> [teardown], "<command>" prints /re/)`,
      );
    if (!shell)
      problem(d.line, `a doc-test directive is for a shell block, not a \`\`\`${lang || 'plain'} block`);
  }
  const roles = [block.needs, block.runBy, block.recipe].filter(Boolean).length;
  if (roles > 1) problem(line, 'a block is either needs, run-by or recipe, not several');
  if (lang === 'console')
    problem(line, 'write commands in a ```bash block (no prompts): ```console is not run');
  if (shell) block.commands = splitCommands(body, line + 1, problem);
  else {
    const file = FILE_PATH.exec(body.split('\n', 1)[0] ?? '')?.[1];
    if (file && !file.split('/').includes('..')) block.file = file;
  }
  for (const p of block.prints) {
    if (!block.commands.some((c) => c.text.startsWith(p.prefix)))
      problem(line, `"${p.prefix}" prints ...: no command of the block starts with that`);
  }
  return block;
}

/** The commands of a shell block: one per line, `\` continues a line, comment-only lines skipped. */
export function splitCommands(
  body: string,
  firstLine: number,
  problem: (line: number, message: string) => void,
): DocCommand[] {
  const commands: DocCommand[] = [];
  const lines = body.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const start = i;
    let text = lines[i]!;
    while (/\\$/.test(text) && i + 1 < lines.length) text += `\n${lines[++i]!}`;
    const trimmed = text.trim();
    if (trimmed === '' || trimmed.startsWith('#')) continue;
    const scan = scanShell(text);
    if (/^\$\s/.test(trimmed))
      problem(firstLine + start, 'a command with a prompt ("$ "): write the command alone');
    if (scan.heredoc)
      problem(
        firstLine + start,
        'a heredoc: write the file with a file block (```yaml starting "# path") instead',
      );
    if (scan.unclosedQuote) problem(firstLine + start, 'an unclosed quote');
    const exit = scan.comment !== undefined ? /^exit (\d+)\b/.exec(scan.comment.trim()) : null;
    commands.push({
      line: firstLine + start,
      text: text.trimEnd(),
      ...(scan.comment !== undefined ? { comment: scan.comment.trim() } : {}),
      expectExit: exit ? Number(exit[1]) : 0,
    });
  }
  return commands;
}

interface ShellScan {
  /** The text of a trailing comment (after an unquoted `#` that starts a word). */
  comment?: string;
  /** The command without that comment. */
  code: string;
  heredoc: boolean;
  unclosedQuote: boolean;
}

/** Just enough of the shell's quoting to find a trailing comment and a heredoc. */
export function scanShell(text: string): ShellScan {
  let quote: "'" | '"' | undefined;
  let heredoc = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (quote === "'") {
      if (c === "'") quote = undefined;
      continue;
    }
    if (c === '\\') {
      i++;
      continue;
    }
    if (quote === '"') {
      if (c === '"') quote = undefined;
      continue;
    }
    if (c === "'" || c === '"') quote = c;
    else if (c === '<' && text[i + 1] === '<' && text[i + 2] !== '<') heredoc = true;
    else if (c === '#' && (i === 0 || /\s/.test(text[i - 1]!)))
      return { comment: text.slice(i + 1), code: text.slice(0, i).trimEnd(), heredoc, unclosedQuote: false };
  }
  return { code: text, heredoc, unclosedQuote: quote !== undefined };
}

/**
 * The words of one shell command line, split at `|`, `;`, `&&`, `||`, `&` into simple commands;
 * quotes removed, redirections dropped. Enough to check a documented command's flags.
 */
export function simpleCommands(code: string): string[][] {
  const commands: string[][] = [[]];
  let word: string | undefined;
  let redirect = false;
  const end = (): void => {
    if (word !== undefined) {
      if (!redirect) commands[commands.length - 1]!.push(word);
      redirect = false;
    }
    word = undefined;
  };
  for (let i = 0; i < code.length; i++) {
    const c = code[i]!;
    if (c === '\\' && code[i + 1] === '\n') {
      i++;
      continue;
    }
    if (c === "'" || c === '"') {
      const close = code.indexOf(c, i + 1);
      word = (word ?? '') + code.slice(i + 1, close < 0 ? undefined : close);
      i = close < 0 ? code.length : close;
      continue;
    }
    if (c === '\\') {
      word = (word ?? '') + (code[i + 1] ?? '');
      i++;
      continue;
    }
    if (/\s/.test(c)) {
      end();
      continue;
    }
    if (c === '|' || c === ';' || c === '&') {
      if (c === '&' && code[i + 1] === '>') {
        end();
        redirect = true;
        i++;
        continue;
      }
      end();
      redirect = false;
      if (code[i + 1] === c) i++;
      commands.push([]);
      continue;
    }
    if (c === '>' || c === '<') {
      // `2>&1`, `>file`, `> file`: the redirection and its target are not words of the command.
      if (word !== undefined && /^\d+$/.test(word)) word = undefined;
      end();
      while (code[i + 1] === '>') i++;
      if (code[i + 1] === '&' && /[\d-]/.test(code[i + 2] ?? '')) {
        i += 2; // a descriptor duplicated (`2>&1`): no target word follows
        continue;
      }
      if (code[i + 1] === '&') i++;
      redirect = true;
      continue;
    }
    word = (word ?? '') + c;
  }
  end();
  return commands.filter((c) => c.length > 0);
}

/** The sandbox-harness arguments of a simple command (env assignments, sudo, `node dist/main.js` handled), or undefined. */
export function harnessArgs(words: readonly string[]): string[] | undefined {
  let i = 0;
  while (i < words.length && /^[A-Za-z_][A-Za-z0-9_]*=/.test(words[i]!)) i++;
  while (words[i] === 'sudo' || words[i] === 'env' || words[i] === 'time') i++;
  while (i < words.length && /^[A-Za-z_][A-Za-z0-9_]*=/.test(words[i]!)) i++;
  const program = words[i];
  if (program === 'sandbox-harness') return words.slice(i + 1);
  if (program === 'npx' && words[i + 1] === 'sandbox-harness') return words.slice(i + 2);
  if (program === 'node' && /(^|\/)dist\/main\.js$/.test(words[i + 1] ?? '')) return words.slice(i + 2);
  return undefined;
}

/**
 * GitHub's anchor for a heading: lower case, punctuation dropped (letters, digits, spaces,
 * `-` and `_` kept), spaces to hyphens. A repeated heading gets `-1`, `-2`, ...
 */
export function headingAnchors(text: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  let fence: string | undefined;
  for (const line of text.split('\n')) {
    const f = /^(`{3,}|~{3,})/.exec(line)?.[1];
    if (f && (fence === undefined || line.startsWith(fence))) {
      fence = fence === undefined ? f : undefined;
      continue;
    }
    if (fence !== undefined) continue;
    const heading = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (!heading) continue;
    const base = heading[1]!
      .replace(/<[^>]+>/g, '')
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .replace(/\s/g, '-');
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    anchors.add(n === 0 ? base : `${base}-${n}`);
  }
  return anchors;
}

/** Relative Markdown links of a page (outside fenced blocks and code spans), with their line. */
export function relativeLinks(text: string): { line: number; target: string }[] {
  const links: { line: number; target: string }[] = [];
  let fence: string | undefined;
  text.split('\n').forEach((line, i) => {
    const f = /^(`{3,}|~{3,})/.exec(line)?.[1];
    if (f && (fence === undefined || line.startsWith(fence))) {
      fence = fence === undefined ? f : undefined;
      return;
    }
    if (fence !== undefined) return;
    const prose = line.replace(/`[^`]*`/g, '');
    for (const m of prose.matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) {
      const target = m[1]!;
      if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue;
      links.push({ line: i + 1, target });
    }
  });
  return links;
}
