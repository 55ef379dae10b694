import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';

/** Every container and image this tool creates carries these labels, so nothing leaks unnoticed. */
export const LABEL = {
  marker: 'sandbox-harness',
  run: 'sandbox-harness.run',
  session: 'sandbox-harness.session',
  role: 'sandbox-harness.role',
  created: 'sandbox-harness.created',
  keep: 'sandbox-harness.keep',
  ownerPid: 'sandbox-harness.owner-pid',
  ownerHost: 'sandbox-harness.owner-host',
  kind: 'sandbox-harness.kind',
  /** The OCI runtime a sandbox was made with (`runsc`), or `default`. */
  runtime: 'sandbox-harness.runtime',
} as const;

/** Kept containers are renamed with this prefix (labels cannot change after creation). */
export const KEPT_NAME_PREFIX = 'sandbox-harness-kept-';

/** One id per harness process; the reaper uses it with the owner pid to find orphans. */
export const SESSION_ID = `${Date.now().toString(36)}-${process.pid}-${randomBytes(3).toString('hex')}`;

export function containerLabels(options: {
  runId?: string | undefined;
  role?: string | undefined;
  keep?: string | undefined;
  runtime?: string | undefined;
  extra?: Record<string, string> | undefined;
}): Record<string, string> {
  return {
    ...options.extra,
    [LABEL.marker]: '1',
    [LABEL.run]: options.runId ?? 'adhoc',
    [LABEL.session]: SESSION_ID,
    [LABEL.role]: options.role ?? 'sandbox',
    [LABEL.created]: new Date().toISOString(),
    [LABEL.keep]: options.keep ?? 'never',
    [LABEL.ownerPid]: String(process.pid),
    [LABEL.ownerHost]: hostname(),
    ...(options.runtime ? { [LABEL.runtime]: options.runtime } : {}),
  };
}

export function containerName(runId: string | undefined, role: string | undefined): string {
  const safe = (s: string) => s.replace(/[^a-zA-Z0-9_.-]/g, '-').slice(0, 40);
  return `sandbox-harness-${safe(runId ?? 'adhoc')}-${safe(role ?? 'sandbox')}-${randomBytes(3).toString('hex')}`;
}

// Labels of the images this tool makes (besides `marker` and `kind`).
export const CONTENT_HASH_LABEL = 'sandbox-harness.content-hash';
export const REPO_LABEL = 'sandbox-harness.repo';
export const BASE_LABEL = 'sandbox-harness.base';
export const ORIGIN_LABEL = 'sandbox-harness.origin';
export const BUILT_FROM_LABEL = 'sandbox-harness.built-from';
/** `none` or `default`: whether the build steps of a repo image had network. */
export const BUILD_NETWORK_LABEL = 'sandbox-harness.build-network';
