/**
 * Names that come from outside (a flag, a catalog, a repo's recipe, a suite or instance file,
 * an engines file, a run record) are parsed with their grammar before any use: a name is a
 * name, never a path, a query or a flag. One parser per kind; each throws `ConfigError` with
 * what it was given and what a name of that kind looks like, and has a `...Problem` twin that
 * returns the same words for schema checks.
 *
 * Image references follow distribution/reference, the grammar Docker and Podman parse them
 * with: `[domain/]path[:tag][@digest]`, where the domain is a host name or `[IPv6]` with an
 * optional port, each path component is lowercase letters and digits joined by `.`, `_`, `__`
 * or dashes, the tag is at most 128 word characters, dots and dashes (not starting with either),
 * the digest is `algorithm:hex` (at least 32 hex digits), and the name is at most 255
 * characters. An image id (`sha256:<hex>`) is a reference of that grammar too. Nothing that is
 * `.` or `..`, nothing with `%`, `?`, `#`, a space or a control character, nothing starting with
 * `-` can pass.
 *
 * A cluster backend adds its kinds here (node and partition names) the same way.
 */
import { ConfigError } from './errors.js';

const ALNUM = '[a-z0-9]+';
const SEPARATOR = '(?:[._]|__|[-]+)';
const PATH_COMPONENT = `${ALNUM}(?:${SEPARATOR}${ALNUM})*`;
const DOMAIN_COMPONENT = '(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])';
const DOMAIN_NAME = `${DOMAIN_COMPONENT}(?:\\.${DOMAIN_COMPONENT})*`;
const IPV6 = '\\[(?:[a-fA-F0-9:]+)\\]';
const DOMAIN = `(?:${DOMAIN_NAME}|${IPV6})(?::[0-9]+)?`;
const TAG = '[\\w][\\w.-]{0,127}';
const DIGEST = '[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}';
const NAME = `(?:${DOMAIN}/)?${PATH_COMPONENT}(?:/${PATH_COMPONENT})*`;
const REFERENCE = new RegExp(`^(${NAME})(?::(${TAG}))?(?:@(${DIGEST}))?$`);
const NAME_MAX = 255;

export interface ImageReference {
  /** The whole reference as given (it parsed, so it is safe to pass on as it is). */
  text: string;
  /** The repository name: `[domain/]path`. */
  name: string;
  domain?: string;
  /** The path components after the domain. */
  path: string[];
  tag?: string;
  digest?: string;
}

const IMAGE_EXPECTED =
  'an image reference such as "node:20-bookworm", "sandbox-harness/base-python:3" or "registry.example:5000/team/app@sha256:<digest>" ([domain/]lowercase path[:tag][@digest])';

/** Why `text` is not an image reference, in words; undefined when it is one. */
export function imageRefProblem(text: string): string | undefined {
  if (typeof text !== 'string' || text === '') return `expected ${IMAGE_EXPECTED}, got nothing`;
  const match = REFERENCE.exec(text);
  if (!match) return `expected ${IMAGE_EXPECTED}, got ${JSON.stringify(text.slice(0, 300))}`;
  if ((match[1] ?? '').length > NAME_MAX) {
    return `expected ${IMAGE_EXPECTED}, got a name of ${(match[1] ?? '').length} characters (at most ${NAME_MAX})`;
  }
  return undefined;
}

/** An image reference, parsed; `ConfigError` naming `what` (a flag, a field, file:line) when it is not one. */
export function parseImageRef(text: string, what = 'image'): ImageReference {
  const problem = imageRefProblem(text);
  if (problem) throw new ConfigError(`${what}: ${problem}`);
  const match = REFERENCE.exec(text)!;
  const name = match[1]!;
  const parts = name.split('/');
  // As distribution splits it: a first component with a dot or a port, or `localhost`, is a domain.
  const first = parts[0]!;
  const hasDomain =
    parts.length > 1 && (/[.:]/.test(first) || first === 'localhost' || first.startsWith('['));
  return {
    text,
    name,
    ...(hasDomain ? { domain: first } : {}),
    path: hasDomain ? parts.slice(1) : parts,
    ...(match[2] !== undefined ? { tag: match[2] } : {}),
    ...(match[3] !== undefined ? { digest: match[3] } : {}),
  };
}

/** The same, for code that only needs to know the name is valid before it passes it on. */
export function imageRef(text: string, what = 'image'): string {
  return parseImageRef(text, what).text;
}

/** A named kind with a one-pattern grammar: its pattern and its words. */
interface SimpleKind {
  pattern: RegExp;
  expected: string;
}

function simpleProblem(kind: SimpleKind, text: string): string | undefined {
  if (typeof text === 'string' && kind.pattern.test(text)) return undefined;
  return `expected ${kind.expected}, got ${typeof text === 'string' ? JSON.stringify(text.slice(0, 300)) : 'nothing'}`;
}

function simpleParse(kind: SimpleKind, text: string, what: string): string {
  const problem = simpleProblem(kind, text);
  if (problem) throw new ConfigError(`${what}: ${problem}`);
  return text;
}

/** An OCI runtime by an engine's name for it (`runc`, `runsc`, `crun`): what `docker run --runtime` takes. */
export const RUNTIME_NAME = /^[A-Za-z0-9][A-Za-z0-9_.+-]{0,127}$/;
const RUNTIME: SimpleKind = { pattern: RUNTIME_NAME, expected: 'a runtime name such as "runc" or "runsc"' };
export const runtimeNameProblem = (text: string) => simpleProblem(RUNTIME, text);
export const parseRuntimeName = (text: string, what = 'runtime') => simpleParse(RUNTIME, text, what);

/** An engine's name in an engines file or a run record (what progress and results call it). */
export const ENGINE_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$/;
const ENGINE: SimpleKind = {
  pattern: ENGINE_NAME,
  expected:
    'an engine name of letters, digits, ".", "_" or "-" (at most 63, starting with a letter or digit)',
};
export const engineNameProblem = (text: string) => simpleProblem(ENGINE, text);
export const parseEngineName = (text: string, what = 'engine name') => simpleParse(ENGINE, text, what);

/** A docker context's name, as `docker context create` takes it. */
export const CONTEXT_NAME = /^[A-Za-z0-9][A-Za-z0-9_.+-]{0,127}$/;
const CONTEXT: SimpleKind = { pattern: CONTEXT_NAME, expected: 'a docker context name such as "build-box"' };
export const contextNameProblem = (text: string) => simpleProblem(CONTEXT, text);
export const parseContextName = (text: string, what = 'docker context') => simpleParse(CONTEXT, text, what);

/**
 * A container or a network by id (hex) or by name, as an engine names them: what a record
 * names to attach to, and what the engine hands back.
 */
export const OBJECT_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,254}$/;
const OBJECT: SimpleKind = {
  pattern: OBJECT_NAME,
  expected:
    'a container or network id or name (letters, digits, ".", "_" or "-", starting with a letter or digit)',
};
export const objectNameProblem = (text: string) => simpleProblem(OBJECT, text);
export const parseObjectName = (text: string, what = 'container') => simpleParse(OBJECT, text, what);
