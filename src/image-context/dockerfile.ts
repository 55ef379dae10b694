/**
 * What a Dockerfile makes the Docker daemon itself fetch. A build without network only
 * takes the network away from the build steps' containers: `ADD <url>` is downloaded by the
 * daemon, and a `FROM` or `COPY --from` image that is not present is pulled by it, both over
 * the host's network. So a no-network build refuses them up front, naming the line.
 *
 * A small reader for the legacy builder's syntax: comments, line continuations (with the
 * `# escape=` directive), `ARG` defaults before the first `FROM` and build-argument
 * substitution in image names, stage names.
 */

export interface DaemonFetch {
  /** 1-based line where the instruction starts. */
  line: number;
  /** `add-url`: ADD of a remote source; `image`: FROM or COPY --from of an image. */
  kind: 'add-url' | 'image';
  /** The URL or image reference as the daemon would see it. */
  ref: string;
  /** The instruction, shortened, for messages. */
  instruction: string;
}

interface Instruction {
  line: number;
  keyword: string;
  args: string;
}

function instructions(text: string): Instruction[] {
  const lines = text.replace(/\r\n?/g, '\n').split('\n');
  // Parser directives must come first; only `escape` changes how lines continue.
  let escape = '\\';
  for (const line of lines) {
    const directive = /^#\s*([a-z]+)\s*=\s*(\S+)\s*$/i.exec(line);
    if (!directive) break;
    if (directive[1]?.toLowerCase() === 'escape' && (directive[2] === '`' || directive[2] === '\\'))
      escape = directive[2];
  }
  const out: Instruction[] = [];
  let current: { line: number; text: string } | undefined;
  for (const [index, raw] of lines.entries()) {
    if (/^\s*#/.test(raw)) continue; // comments, also between continued lines
    if (current === undefined && raw.trim() === '') continue;
    const continued = raw.trimEnd().endsWith(escape);
    const body = continued ? raw.trimEnd().slice(0, -1) : raw;
    current = current
      ? { line: current.line, text: `${current.text} ${body}` }
      : { line: index + 1, text: body };
    if (continued) continue;
    const match = /^\s*([A-Za-z]+)\s*(.*)$/s.exec(current.text);
    if (match)
      out.push({
        line: current.line,
        keyword: (match[1] ?? '').toUpperCase(),
        args: (match[2] ?? '').trim(),
      });
    current = undefined;
  }
  return out;
}

/** `$VAR`, `${VAR}`, `${VAR:-default}`; undefined when a variable has no value. */
function substitute(text: string, vars: ReadonlyMap<string, string>): string | undefined {
  let unresolved = false;
  const result = text.replace(
    /\$(?:\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}|([A-Za-z_][A-Za-z0-9_]*))/g,
    (_, braced: string | undefined, fallback: string | undefined, bare: string | undefined) => {
      const value = vars.get((braced ?? bare) as string);
      if (value !== undefined && value !== '') return value;
      if (fallback !== undefined) return fallback;
      unresolved = true;
      return '';
    },
  );
  return unresolved ? undefined : result;
}

function words(args: string): string[] {
  return args.split(/\s+/).filter(Boolean);
}

function shorten(text: string): string {
  return text.length > 120 ? `${text.slice(0, 119)}…` : text;
}

const REMOTE = /^(?:[a-z][a-z0-9+.-]*:\/\/|git@)/i;

/**
 * Everything the daemon would fetch for this Dockerfile: remote ADD sources and the images
 * of FROM and COPY --from (other than `scratch` and earlier stages). Image references whose
 * build arguments are unknown are left out: the daemon cannot resolve them either.
 */
export function daemonFetches(
  dockerfile: string,
  buildArgs: Readonly<Record<string, string>> = {},
): DaemonFetch[] {
  const vars = new Map<string, string>();
  const stages = new Set<string>();
  const fetches: DaemonFetch[] = [];
  let seenFrom = false;
  const image = (line: number, instruction: string, raw: string) => {
    const ref = substitute(raw, vars);
    if (ref === undefined || ref === '' || ref.toLowerCase() === 'scratch' || stages.has(ref.toLowerCase()))
      return;
    fetches.push({ line, kind: 'image', ref, instruction: shorten(instruction) });
  };
  for (const { line, keyword, args } of instructions(dockerfile)) {
    const instruction = `${keyword} ${args}`;
    if (keyword === 'ARG' && !seenFrom) {
      for (const declaration of words(args)) {
        const [name, ...rest] = declaration.split('=');
        if (!name) continue;
        const value =
          buildArgs[name] ?? (rest.length ? rest.join('=').replace(/^(["'])(.*)\1$/, '$2') : undefined);
        if (value !== undefined) vars.set(name, value);
      }
    } else if (keyword === 'FROM') {
      seenFrom = true;
      const parts = words(args).filter((w) => !w.startsWith('--'));
      if (parts[0]) image(line, instruction, parts[0]);
      if (parts[1]?.toUpperCase() === 'AS' && parts[2]) stages.add(parts[2].toLowerCase());
    } else if (keyword === 'COPY') {
      const from = words(args).find((w) => w.toLowerCase().startsWith('--from='));
      const source = from?.slice('--from='.length);
      if (source && !/^\d+$/.test(source)) image(line, instruction, source);
    } else if (keyword === 'ADD') {
      let sources: string[];
      try {
        const parsed: unknown = args.startsWith('[') ? JSON.parse(args) : undefined;
        sources = Array.isArray(parsed) ? parsed.map(String) : words(args).filter((w) => !w.startsWith('--'));
      } catch {
        sources = words(args);
      }
      for (const source of sources.slice(0, -1)) {
        if (REMOTE.test(source))
          fetches.push({ line, kind: 'add-url', ref: source, instruction: shorten(instruction) });
      }
    }
  }
  return fetches;
}

/**
 * The default a Dockerfile gives a build argument before its first `FROM`
 * (`ARG BASE_IMAGE=sandbox-harness/base-python:3`), with its line; undefined when it declares
 * none or gives no default.
 */
export function argDefault(dockerfile: string, name: string): { value: string; line: number } | undefined {
  for (const { line, keyword, args } of instructions(dockerfile)) {
    if (keyword === 'FROM') return undefined;
    if (keyword !== 'ARG') continue;
    for (const declaration of words(args)) {
      const [key, ...rest] = declaration.split('=');
      if (key !== name || rest.length === 0) continue;
      const value = rest.join('=').replace(/^(["'])(.*)\1$/, '$2');
      return value === '' ? undefined : { value, line };
    }
  }
  return undefined;
}

/**
 * The image the final stage builds on, as the daemon would resolve it with these build
 * arguments: through `AS` stage names to the image at the root. Undefined when a reference
 * uses an argument with no value, or the final stage is `scratch`.
 */
export function finalBaseImage(
  dockerfile: string,
  buildArgs: Readonly<Record<string, string>> = {},
): string | undefined {
  const vars = new Map<string, string>();
  const stages = new Map<string, string | undefined>();
  let seenFrom = false;
  let last: string | undefined;
  for (const { keyword, args } of instructions(dockerfile)) {
    if (keyword === 'ARG' && !seenFrom) {
      for (const declaration of words(args)) {
        const [name, ...rest] = declaration.split('=');
        if (!name) continue;
        const value =
          buildArgs[name] ?? (rest.length ? rest.join('=').replace(/^(["'])(.*)\1$/, '$2') : undefined);
        if (value !== undefined) vars.set(name, value);
      }
    } else if (keyword === 'FROM') {
      seenFrom = true;
      const parts = words(args).filter((w) => !w.startsWith('--'));
      const raw = parts[0] ? substitute(parts[0], vars) : undefined;
      const ref = raw === undefined || raw === '' ? undefined : raw;
      const resolved =
        ref !== undefined && stages.has(ref.toLowerCase()) ? stages.get(ref.toLowerCase()) : ref;
      last = resolved !== undefined && resolved.toLowerCase() === 'scratch' ? undefined : resolved;
      if (parts[1]?.toUpperCase() === 'AS' && parts[2]) stages.set(parts[2].toLowerCase(), last);
    }
  }
  return last;
}
