/**
 * Which Docker engines an eval (or `doctor`) uses: an `engines.yaml` file and/or `--engine`
 * on the command line, resolved to endpoints. Without either, the local engine alone.
 *
 *     # engines.yaml
 *     engines:
 *       - context: default            # the local engine (DOCKER_HOST or the socket)
 *         capacity: 2
 *       - context: build-box          # a docker context by name
 *       - name: gpu-1
 *         host: tcp://10.0.0.5:2376   # TCP needs mutual TLS; paths relative to this file
 *         tls: { ca: certs/ca.pem, cert: certs/cert.pem, key: certs/key.pem }
 *       - host: ssh://ci@runner-3     # ssh: the agent, or identityFile; host key from known_hosts
 *         identityFile: ~/.ssh/id_ed25519
 *
 * Every problem is reported at once with file:line:col, like the catalog's. TLS and ssh
 * keys are read here into this process and go nowhere but the connection to their engine.
 */
import { readFile } from 'node:fs/promises';
import { homedir } from 'node:os';
import path from 'node:path';
import { z } from 'zod';
import { ConfigError, HarnessError, UsageError } from '../../../errors.js';
import { problemsError, validateYaml, type ValidationProblem } from '../../../yaml-validate.js';
import { CONTEXT_NAME, ENGINE_NAME, parseContextName } from '../../../object-names.js';
import {
  describeEndpoint,
  endpointKey,
  localEndpoint,
  parseEngineUrl,
  readTlsFiles,
  resolveContext,
  resolveEngineRef,
  type EngineEndpoint,
} from '../engine/endpoint.js';
import { dockerEngineRef, type DockerEngineFields, type EngineRef } from './engine-ref.js';

export type { EngineRef } from './engine-ref.js';

export interface EngineSpec {
  /** Unique in the fleet; names the engine in progress, results and messages. */
  name: string;
  endpoint: EngineEndpoint;
  /** Absent for the local engine used by default. */
  ref?: EngineRef;
  /** Trials at once on this engine; absent: from the engine's CPUs and the trial's CPU limit. */
  capacity?: number;
  /** Where the entry came from: `engines.yaml:4:5` or `--engine build-box`. */
  origin: string;
}

const entrySchema = z
  .strictObject({
    name: z
      .string({ error: 'expected a name of letters, digits, ".", "_" or "-"' })
      .regex(ENGINE_NAME, { error: 'expected a name of letters, digits, ".", "_" or "-" (at most 63)' })
      .optional(),
    context: z
      .string({ error: 'expected the name of a docker context' })
      .regex(CONTEXT_NAME, {
        error: 'expected the name of a docker context (letters, digits, ".", "_", "+" or "-")',
      })
      .optional(),
    host: z
      .string({ error: 'expected an engine URL: tcp://HOST:2376, ssh://USER@HOST or unix:///PATH' })
      .min(1)
      .optional(),
    tls: z
      .strictObject({
        ca: z.string({ error: 'expected the path of the CA certificate (ca.pem)' }).min(1),
        cert: z.string({ error: 'expected the path of the client certificate (cert.pem)' }).min(1),
        key: z.string({ error: 'expected the path of the client key (key.pem)' }).min(1),
      })
      .optional(),
    identityFile: z.string({ error: 'expected the path of an ssh private key' }).min(1).optional(),
    capacity: z
      .int({ error: 'expected a whole number of trials at once' })
      .min(1, { error: 'expected at least 1 trial at once' })
      .max(1000, { error: 'expected at most 1000 trials at once' })
      .optional(),
  })
  .superRefine((entry, ctx) => {
    if ((entry.context === undefined) === (entry.host === undefined)) {
      ctx.addIssue({
        code: 'custom',
        message: 'an engine is either `context: NAME` or `host: URL`, exactly one of them',
      });
      return;
    }
    const scheme = /^([a-z][a-z0-9+.-]*):\/\//i.exec(entry.host ?? '')?.[1]?.toLowerCase();
    if (entry.host !== undefined && !['tcp', 'https', 'http', 'ssh', 'unix'].includes(scheme ?? '')) {
      ctx.addIssue({
        code: 'custom',
        path: ['host'],
        message: `host ${JSON.stringify(entry.host)} is not an engine URL: expected tcp://HOST:2376, ssh://USER@HOST or unix:///PATH`,
      });
    }
    if (entry.tls && !(scheme === 'tcp' || scheme === 'https')) {
      ctx.addIssue({
        code: 'custom',
        path: ['tls'],
        message: entry.context
          ? 'a context brings its own TLS files (docker context update); remove `tls:` here'
          : '`tls:` is only for tcp:// hosts',
      });
    }
    if (entry.identityFile && scheme !== 'ssh') {
      ctx.addIssue({
        code: 'custom',
        path: ['identityFile'],
        message: '`identityFile:` is only for ssh:// hosts',
      });
    }
  });

const enginesFileSchema = z.strictObject({
  engines: z
    .array(entrySchema, { error: 'expected a list of engines' })
    .min(1, { error: 'expected at least one engine' }),
});

type Entry = z.infer<typeof entrySchema>;

export interface ResolveEnginesOptions {
  /** `--engines engines.yaml`. */
  file?: string | undefined;
  /** `--engine` values: context names or URLs, in order. */
  refs?: string[];
  cwd?: string;
  env?: NodeJS.ProcessEnv;
}

/** The engines named by a file and/or `--engine`; none named: the local engine alone. */
export async function resolveEngines(options: ResolveEnginesOptions = {}): Promise<EngineSpec[]> {
  const env = options.env ?? process.env;
  const cwd = options.cwd ?? process.cwd();
  const specs: EngineSpec[] = [];
  if (options.file !== undefined) specs.push(...(await loadEnginesFile(options.file, { cwd, env })));
  for (const ref of options.refs ?? []) specs.push(await engineFromRef(ref, env));
  if (specs.length === 0) {
    return [{ name: 'local', endpoint: await localEndpoint(env), origin: 'the local engine (default)' }];
  }
  const byName = new Map<string, EngineSpec>();
  const byKey = new Map<string, EngineSpec>();
  for (const spec of specs) {
    const sameName = byName.get(spec.name);
    if (sameName) {
      throw new UsageError(`two engines are named ${spec.name}: ${sameName.origin} and ${spec.origin}`, {
        hint: 'Give one of them another `name:`.',
      });
    }
    const key = endpointKey(spec.endpoint);
    const same = byKey.get(key);
    if (same) {
      throw new UsageError(
        `${same.origin} and ${spec.origin} are the same engine (${describeEndpoint(spec.endpoint)}): listing it twice would count its capacity twice`,
      );
    }
    byName.set(spec.name, spec);
    byKey.set(key, spec);
  }
  return specs;
}

async function engineFromRef(ref: string, env: NodeJS.ProcessEnv): Promise<EngineSpec> {
  const origin = `--engine ${ref}`;
  try {
    const isUrl = ref.includes('://');
    // A context's name also names the engine in progress, results and records.
    if (!isUrl) parseContextName(ref, origin);
    const endpoint = await resolveEngineRef(ref, { env, label: origin });
    const name = isUrl ? defaultName(endpoint) : ref;
    return { name, endpoint, origin, ref: dockerEngineRef(isUrl ? { url: ref } : { context: ref }) };
  } catch (error) {
    if (error instanceof ConfigError) {
      // A bad command-line value is a usage error (exit 2 either way), said as such.
      throw new UsageError(error.message.startsWith(origin) ? error.message : `${origin}: ${error.message}`, {
        ...(error.hint ? { hint: error.hint } : {}),
      });
    }
    throw error;
  }
}

function defaultName(endpoint: EngineEndpoint): string {
  if (endpoint.transport === 'unix') return 'local';
  const name = endpoint.transport === 'ssh' ? endpoint.host : `${endpoint.host}-${endpoint.port}`;
  return name.replace(/[^A-Za-z0-9_.-]/g, '-').slice(0, 63);
}

/**
 * The engine a run record names, resolved again: from the engines file entry, the docker
 * context or the URL it was reached by. The record is data (anyone with access to the repo
 * may have edited it): the engine it leads to must still be one the user's own files or
 * contexts name, with their own TLS or ssh keys, and commands there still only act on
 * containers that carry the run's id.
 */
export async function resolveStoredEngine(
  ref: DockerEngineFields,
  options: { env?: NodeJS.ProcessEnv } = {},
): Promise<EngineSpec> {
  const env = options.env ?? process.env;
  if ('file' in ref) {
    const specs = await loadEnginesFile(ref.file, { env });
    const spec = specs.find((s) => s.name === ref.entry);
    if (!spec) {
      throw new ConfigError(
        `${ref.file} no longer lists an engine named ${ref.entry} (it has ${specs.map((s) => s.name).join(', ')})`,
        [],
        { hint: 'Name the engine again with --engines FILE or --engine CONTEXT-OR-URL.' },
      );
    }
    return spec;
  }
  return engineFromRef('context' in ref ? ref.context : ref.url, env);
}

export interface LoadEnginesFileOptions {
  cwd?: string;
  env?: NodeJS.ProcessEnv;
}

/**
 * Reads and resolves `engines.yaml`: schema problems, unreadable TLS or key files, unknown
 * contexts and refused endpoints all come back together, each at its line.
 */
export async function loadEnginesFile(
  file: string,
  options: LoadEnginesFileOptions = {},
): Promise<EngineSpec[]> {
  const cwd = options.cwd ?? process.cwd();
  const env = options.env ?? process.env;
  const absolute = path.resolve(cwd, file);
  const relative = path.relative(cwd, absolute);
  const displayPath =
    relative && !relative.startsWith('..') && relative.length < absolute.length ? relative : absolute;
  let text: string;
  try {
    text = (await readFile(absolute, 'utf8')).replace(/^\uFEFF/, '');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    throw new ConfigError(
      code === 'ENOENT'
        ? `engines file not found: ${displayPath}`
        : `cannot read ${displayPath}: ${code ?? error}`,
      [],
      {
        hint: 'Pass the path of a YAML file with an `engines:` list (see docs/clusters.md).',
      },
    );
  }
  const result = validateYaml(absolute, text, enginesFileSchema, { displayPath });
  if (!result.ok) throw problemsError(displayPath, result.problems);

  const dir = path.dirname(absolute);
  const problems: ValidationProblem[] = [];
  const specs: EngineSpec[] = [];
  for (const [index, entry] of result.value.engines.entries()) {
    const at = (key?: keyof Entry) =>
      result.parsed.locate(key ? ['engines', index, key] : ['engines', index]);
    const origin = (key?: keyof Entry) => {
      const { line, column } = at(key);
      return `${displayPath}:${line}:${column}`;
    };
    try {
      const endpoint = await resolveEntry(entry, dir, env);
      const name = entry.name ?? entry.context ?? defaultName(endpoint);
      specs.push({
        name,
        endpoint,
        ref: dockerEngineRef({ file: absolute, entry: name }),
        ...(entry.capacity === undefined ? {} : { capacity: entry.capacity }),
        origin: origin(),
      });
    } catch (error) {
      if (!(error instanceof HarnessError)) throw error;
      const blamed = error.details?.key;
      const key: keyof Entry =
        blamed === 'tls' || blamed === 'identityFile' ? blamed : entry.context ? 'context' : 'host';
      problems.push({
        file: displayPath,
        ...at(key),
        path: `engines[${index}].${key}`,
        message: error.hint ? `${error.message} (${error.hint})` : error.message,
      });
    }
  }
  if (problems.length > 0) throw problemsError(displayPath, problems);
  return specs;
}

function expandHome(file: string, dir: string, env: NodeJS.ProcessEnv): string {
  if (file === '~' || file.startsWith('~/')) return path.join(env.HOME || homedir(), file.slice(1));
  return path.resolve(dir, file);
}

async function resolveEntry(entry: Entry, dir: string, env: NodeJS.ProcessEnv): Promise<EngineEndpoint> {
  if (entry.context !== undefined)
    return resolveContext(entry.context, { env, label: `context ${entry.context}` });
  const host = entry.host ?? '';
  let tls;
  if (entry.tls) {
    try {
      tls = await readTlsFiles({
        ca: expandHome(entry.tls.ca, dir, env),
        cert: expandHome(entry.tls.cert, dir, env),
        key: expandHome(entry.tls.key, dir, env),
      });
    } catch (error) {
      if (error instanceof ConfigError) throw new ConfigError(error.message, [], { details: { key: 'tls' } });
      throw error;
    }
  }
  let identityFile: string | undefined;
  if (entry.identityFile) identityFile = expandHome(entry.identityFile, dir, env);
  return parseEngineUrl(host, {
    env,
    label: `host ${host}`,
    // Only what this entry names: TLS files lying around in DOCKER_CERT_PATH do not apply.
    tls: tls ?? false,
    ...(identityFile ? { identityFile } : {}),
  }).catch((error: unknown) => {
    if (error instanceof ConfigError && identityFile && /ssh key/.test(error.message)) {
      throw new ConfigError(error.message, [], { details: { key: 'identityFile' } });
    }
    throw error;
  });
}
