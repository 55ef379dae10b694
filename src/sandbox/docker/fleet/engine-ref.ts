/**
 * How a run record names a Docker engine again, when only the record is left (`inspect`,
 * `shell`, `rerun-tests` of a kept container): an entry of an engines file, a docker context,
 * or the URL given to `--engine`. These fields are the Docker backend's own: a record keeps
 * them beside `backend: 'docker'` and nothing above the registry reads them. No engine code
 * here (zod only), so reading a record does not load the backend.
 */
import { z } from 'zod';
import { CONTEXT_NAME, ENGINE_NAME } from '../../../object-names.js';

/** The Docker backend's fields of a reference (never a secret: TLS and ssh keys are read again from where they are kept). */
export type DockerEngineFields = { file: string; entry: string } | { context: string } | { url: string };

/** A reference as the Docker backend writes it into a record. */
export type EngineRef = { backend: 'docker' } & DockerEngineFields;

/** The reference of an engine the Docker backend reaches by `fields`. */
export function dockerEngineRef(fields: DockerEngineFields): EngineRef {
  return { backend: 'docker', ...fields };
}

/**
 * A reference as read back from a record: hostile data like the rest of it. Plain names, an
 * absolute YAML path, an engine URL without credentials; whatever it names is resolved with
 * the user's own files and keys. `backend` is `docker`, or absent in a record written before
 * references named their backend (which are all Docker's).
 */
const backend = z.literal('docker').optional();
export const dockerEngineRefSchema = z.union([
  z.strictObject({
    backend,
    file: z
      .string()
      .max(4096)
      .regex(/^\/[^\0\n]*\.ya?ml$/, { error: 'expected the absolute path of an engines file (.yaml)' }),
    entry: z.string().regex(ENGINE_NAME, { error: 'expected an engine name' }),
  }),
  z.strictObject({
    backend,
    context: z.string().regex(CONTEXT_NAME, { error: 'expected a docker context name' }),
  }),
  z.strictObject({
    backend,
    url: z
      .string()
      .max(500)
      .regex(/^(tcp|https|http|ssh|unix):\/\/[^\s:@/]*(@[^\s:@/]+)?[^\s@]*$/, {
        error: 'expected an engine URL without a password (tcp://, ssh://, unix://)',
      }),
  }),
]);

/** The fields alone, whatever `backend` said. */
export function dockerEngineFields(
  ref: DockerEngineFields & { backend?: string | undefined },
): DockerEngineFields {
  if ('file' in ref) return { file: ref.file, entry: ref.entry };
  return 'context' in ref ? { context: ref.context } : { url: ref.url };
}

/** Where the reference leads, for messages; no secrets. */
export function describeDockerEngineRef(ref: DockerEngineFields): string {
  if ('file' in ref) return `entry ${ref.entry} of ${ref.file}`;
  return 'context' in ref ? `docker context ${ref.context}` : ref.url;
}
