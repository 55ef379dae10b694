/**
 * `.gitignore` semantics, for deciding which new paths in a sandbox are build and test
 * output rather than the agent's change. The files are the repo's and therefore hostile
 * data: every file, line and rule is capped, and matching never backtracks (each pattern
 * runs as a state set over the path, time linear in pattern × path), so a crafted pattern
 * cannot stall a run. Whenever a file is over a cap it is left out whole: a partly read
 * file could lose a later `!negation` and ignore more than git would; leaving it out can
 * only gate more.
 *
 * What git does and this does too: `#` comments, blank lines, trailing spaces (unless
 * escaped), `\` escapes, `!` re-includes, a trailing `/` matches folders only, a slash at
 * the start or in the middle anchors the pattern to the folder of its `.gitignore`, `*`,
 * `?`, `[...]` (with `!`/`^`, ranges and `[:class:]`), `**` as a leading `**\/`, a middle
 * `/**\/` and a trailing `/**`; the last matching line wins, deeper files over shallower;
 * a path whose parent folder is ignored is ignored (no re-including below it); a
 * `.gitignore` inside an ignored folder is never read. Matching is byte-exact (case and
 * Unicode normalisation matter), as git on Linux.
 */

export interface GitignoreCaps {
  /** Most `.gitignore` files read. */
  maxFiles: number;
  /** Largest `.gitignore` file, bytes. */
  maxFileBytes: number;
  /** Longest pattern line, characters. */
  maxLineLength: number;
  /** Most rules in all files together. */
  maxRules: number;
}

export const DEFAULT_GITIGNORE_CAPS: GitignoreCaps = {
  maxFiles: 256,
  maxFileBytes: 256 * 1024,
  maxLineLength: 1024,
  maxRules: 20_000,
};

type Token =
  | { t: 'lit'; c: string }
  | { t: 'one' }
  | { t: 'class'; test: (c: string) => boolean }
  | { t: 'star' }
  | { t: 'all' }
  | { t: 'dirs' };

export interface GitignoreRule {
  /** The line as written (for messages). */
  text: string;
  negated: boolean;
  dirOnly: boolean;
  /** Matched against the whole path below the file's folder, not only the last name. */
  anchored: boolean;
  /** The pattern without wildcards, when it has none (a plain string compare). */
  literal?: string | undefined;
  tokens: Token[];
}

const POSIX_CLASSES: Record<string, (c: string) => boolean> = {
  alpha: (c) => /[A-Za-z]/.test(c),
  digit: (c) => /[0-9]/.test(c),
  alnum: (c) => /[A-Za-z0-9]/.test(c),
  upper: (c) => /[A-Z]/.test(c),
  lower: (c) => /[a-z]/.test(c),
  space: (c) => /\s/.test(c),
  xdigit: (c) => /[0-9A-Fa-f]/.test(c),
  punct: (c) => /[!-/:-@[-`{-~]/.test(c),
  blank: (c) => c === ' ' || c === '\t',
};

/** A bracket expression at `start` (the `[`): its test and where it ends, or undefined if malformed. */
function parseClass(
  chars: string[],
  start: number,
): { test: (c: string) => boolean; end: number } | undefined {
  let i = start + 1;
  let negate = false;
  if (chars[i] === '!' || chars[i] === '^') {
    negate = true;
    i++;
  }
  const parts: Array<(c: string) => boolean> = [];
  let first = true;
  while (i < chars.length) {
    let c = chars[i]!;
    if (c === ']' && !first) {
      return {
        test: (x) => x !== '/' && parts.some((p) => p(x)) !== negate,
        end: i,
      };
    }
    first = false;
    if (c === '[' && chars[i + 1] === ':') {
      const close = chars.indexOf(':', i + 2);
      if (close < 0 || chars[close + 1] !== ']') return undefined;
      const test = POSIX_CLASSES[chars.slice(i + 2, close).join('')];
      if (!test) return undefined;
      parts.push(test);
      i = close + 2;
      continue;
    }
    if (c === '\\') {
      i++;
      if (i >= chars.length) return undefined;
      c = chars[i]!;
    }
    if (chars[i + 1] === '-' && chars[i + 2] !== undefined && chars[i + 2] !== ']') {
      let hi = chars[i + 2]!;
      let next = i + 3;
      if (hi === '\\') {
        if (chars[i + 3] === undefined) return undefined;
        hi = chars[i + 3]!;
        next = i + 4;
      }
      const lo = c;
      parts.push((x) => x >= lo && x <= hi);
      i = next;
      continue;
    }
    const lit = c;
    parts.push((x) => x === lit);
    i++;
  }
  return undefined;
}

/** Tokens of a pattern (leading `/` already removed); undefined when it can never match. */
function tokenize(pattern: string): Token[] | undefined {
  const chars = [...pattern];
  const tokens: Token[] = [];
  for (let i = 0; i < chars.length; i++) {
    const c = chars[i]!;
    if (c === '\\') {
      const next = chars[++i];
      if (next === undefined) return undefined;
      tokens.push({ t: 'lit', c: next });
    } else if (c === '*') {
      let j = i;
      while (chars[j + 1] === '*') j++;
      const double = j > i;
      const atStart = i === 0 || chars[i - 1] === '/';
      const atEnd = j === chars.length - 1 || chars[j + 1] === '/';
      if (double && atStart && atEnd) {
        if (j === chars.length - 1) tokens.push({ t: 'all' });
        else {
          // `**/`: zero or more whole folders.
          tokens.push({ t: 'dirs' });
          j++;
        }
      } else tokens.push({ t: 'star' });
      i = j;
    } else if (c === '?') tokens.push({ t: 'one' });
    else if (c === '[') {
      const parsed = parseClass(chars, i);
      if (!parsed) return undefined;
      tokens.push({ t: 'class', test: parsed.test });
      i = parsed.end;
    } else tokens.push({ t: 'lit', c });
  }
  return tokens;
}

/**
 * Whether `text` matches `tokens`, by a set of states: state k means "tokens before k are
 * matched"; `n + 1 + k` is inside a `**\/` at k that has consumed something (it may only
 * leave after a `/`).
 */
function matchTokens(tokens: readonly Token[], text: string): boolean {
  const n = tokens.length;
  // 0..n: before token k (n: all matched); n+1+k: inside the `**/` at k.
  const size = 2 * n + 1;
  let current = new Uint8Array(size);
  let next = new Uint8Array(size);
  const close = (set: Uint8Array) => {
    for (let k = 0; k < n; k++) {
      const t = tokens[k]!.t;
      if (set[k] && (t === 'star' || t === 'all' || t === 'dirs')) set[k + 1] = 1;
    }
  };
  current[0] = 1;
  close(current);
  for (const c of text) {
    next.fill(0);
    let any = false;
    for (let k = 0; k < n; k++) {
      const token = tokens[k]!;
      if (current[k]) {
        switch (token.t) {
          case 'lit':
            if (token.c === c) next[k + 1] = 1;
            break;
          case 'one':
            if (c !== '/') next[k + 1] = 1;
            break;
          case 'class':
            if (token.test(c)) next[k + 1] = 1;
            break;
          case 'star':
            if (c !== '/') next[k] = 1;
            break;
          case 'all':
            next[k] = 1;
            break;
          case 'dirs':
            next[n + 1 + k] = 1;
            if (c === '/') next[k + 1] = 1;
            break;
        }
      }
      if (token.t === 'dirs' && current[n + 1 + k]) {
        next[n + 1 + k] = 1;
        if (c === '/') next[k + 1] = 1;
      }
    }
    close(next);
    for (let k = 0; k < size; k++) if (next[k]) any = true;
    if (!any) return false;
    [current, next] = [next, current];
  }
  return current[n] === 1;
}

/** One line of a `.gitignore`, or undefined for a comment, a blank line or a pattern that cannot match. */
export function parseGitignoreLine(raw: string, maxLength = DEFAULT_GITIGNORE_CAPS.maxLineLength) {
  let line = raw.endsWith('\r') ? raw.slice(0, -1) : raw;
  if (line.length > maxLength) return undefined;
  if (line === '' || line.startsWith('#')) return undefined;
  // Trailing spaces go, unless the last one is escaped.
  let end = line.length;
  while (end > 0 && line[end - 1] === ' ' && line[end - 2] !== '\\') end--;
  line = line.slice(0, end);
  let negated = false;
  if (line.startsWith('!')) {
    negated = true;
    line = line.slice(1);
  }
  let dirOnly = false;
  if (line.endsWith('/') && !line.endsWith('\\/')) {
    dirOnly = true;
    line = line.replace(/\/+$/, '');
  }
  if (line === '') return undefined;
  const anchored = line.includes('/');
  if (line.startsWith('/')) line = line.slice(1);
  if (line === '') return undefined;
  const tokens = tokenize(line);
  if (!tokens) return undefined;
  const literal = tokens.every((t) => t.t === 'lit')
    ? tokens.map((t) => (t as { c: string }).c).join('')
    : undefined;
  const rule: GitignoreRule = {
    text: raw,
    negated,
    dirOnly,
    anchored,
    tokens,
    literal,
  };
  return rule;
}

/**
 * The rules of one file, or undefined when a line is over the length cap (then the whole
 * file is left out: dropping only that line could drop a `!negation`).
 */
export function parseGitignore(
  text: string,
  maxLineLength = DEFAULT_GITIGNORE_CAPS.maxLineLength,
): GitignoreRule[] | undefined {
  const rules: GitignoreRule[] = [];
  for (const line of text.split('\n')) {
    if (line.length > maxLineLength) return undefined;
    const rule = parseGitignoreLine(line, maxLineLength);
    if (rule) rules.push(rule);
  }
  return rules;
}

function ruleMatches(rule: GitignoreRule, relative: string, isDir: boolean): boolean {
  if (rule.dirOnly && !isDir) return false;
  const subject = rule.anchored ? relative : relative.slice(relative.lastIndexOf('/') + 1);
  if (rule.literal !== undefined) return rule.literal === subject;
  return matchTokens(rule.tokens, subject);
}

function parentOf(path: string): string {
  const slash = path.lastIndexOf('/');
  return slash < 0 ? '' : path.slice(0, slash);
}

/** The rules of a set of `.gitignore` files, by the folder each is in ('' for the root). */
export class GitignoreMatcher {
  private readonly byDir: Map<string, GitignoreRule[]>;
  /** Folder -> ignored, for folders asked about (every path of a build shares a few). */
  private readonly folders = new Map<string, boolean>();

  constructor(byDir: ReadonlyMap<string, readonly GitignoreRule[]>) {
    this.byDir = new Map([...byDir].map(([dir, rules]) => [dir, [...rules]]));
  }

  get fileCount(): number {
    return this.byDir.size;
  }

  /** Whether git would ignore `path` (a folder when `isDir`). */
  ignores(path: string, isDir: boolean): boolean {
    const parent = parentOf(path);
    if (parent !== '' && this.folderIgnored(parent)) return true;
    return this.decide(path, isDir);
  }

  private folderIgnored(folder: string): boolean {
    const known = this.folders.get(folder);
    if (known !== undefined) return known;
    const parent = parentOf(folder);
    const ignored = (parent !== '' && this.folderIgnored(parent)) || this.decide(folder, true);
    // Bounded: a hostile scan of deep unique folders must not grow this without end.
    if (this.folders.size > 100_000) this.folders.clear();
    this.folders.set(folder, ignored);
    return ignored;
  }

  /** The last matching rule of the deepest file that has one, among the files above `path`. */
  private decide(path: string, isDir: boolean): boolean {
    let dir = parentOf(path);
    for (;;) {
      const rules = this.byDir.get(dir);
      if (rules) {
        const relative = dir === '' ? path : path.slice(dir.length + 1);
        for (let i = rules.length - 1; i >= 0; i--) {
          const rule = rules[i]!;
          if (ruleMatches(rule, relative, isDir)) return !rule.negated;
        }
      }
      if (dir === '') return false;
      dir = parentOf(dir);
    }
  }
}

export interface LoadedGitignores {
  matcher: GitignoreMatcher;
  /** The files whose rules are in the matcher. */
  read: string[];
  /** Files left out, and why (caps, unreadable). */
  skipped: string[];
}

/**
 * A matcher from the `.gitignore` files at `paths` (tree paths such as `a/.gitignore`),
 * shallowest first. A file in a folder the files above already ignore is not read (git
 * never looks there); a file over a cap, or that `read` cannot vouch for, is left out.
 */
export async function loadGitignores(
  paths: readonly string[],
  read: (path: string) => Promise<Buffer | undefined>,
  caps: GitignoreCaps = DEFAULT_GITIGNORE_CAPS,
): Promise<LoadedGitignores> {
  const byDepth = [...paths].sort(
    (a, b) => a.split('/').length - b.split('/').length || (a < b ? -1 : a > b ? 1 : 0),
  );
  const byDir = new Map<string, GitignoreRule[]>();
  const done: string[] = [];
  const skipped: string[] = [];
  let rules = 0;
  for (const path of byDepth) {
    const dir = parentOf(path);
    if (dir !== '' && new GitignoreMatcher(byDir).ignores(dir, true)) continue;
    if (done.length >= caps.maxFiles) {
      skipped.push(`${path}: more than ${caps.maxFiles} .gitignore files`);
      continue;
    }
    const content = await read(path);
    if (content === undefined) {
      skipped.push(`${path}: not readable as the pristine file`);
      continue;
    }
    if (content.length > caps.maxFileBytes) {
      skipped.push(`${path}: over ${caps.maxFileBytes} bytes`);
      continue;
    }
    const parsed = parseGitignore(content.toString('utf8'), caps.maxLineLength);
    if (!parsed) {
      skipped.push(`${path}: a line over ${caps.maxLineLength} characters`);
      continue;
    }
    if (rules + parsed.length > caps.maxRules) {
      skipped.push(`${path}: more than ${caps.maxRules} rules in all`);
      continue;
    }
    rules += parsed.length;
    done.push(path);
    if (parsed.length > 0) byDir.set(dir, parsed);
  }
  return { matcher: new GitignoreMatcher(byDir), read: done, skipped };
}
