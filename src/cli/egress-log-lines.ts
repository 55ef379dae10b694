/** A run's egress proxy logs, read back as data and written as lines (`inspect`, `logs`). */
import { readRunFile, type StoredRun } from '../runs/record.js';
import type { EgressLogEntry } from '../sandbox/egress/proxy.js';

/** A proxy log line as read back (the proxy's own shape, less the address it connected to). */
export type EgressLine = Omit<EgressLogEntry, 'address'>;

/** An egress log line as recorded; anything else in the file (a torn line, junk) is skipped. */
function egressLine(value: unknown): EgressLine | undefined {
  if (!value || typeof value !== 'object') return undefined;
  const v = value as Record<string, unknown>;
  const text = (x: unknown) => (typeof x === 'string' ? x.slice(0, 300) : undefined);
  const count = (x: unknown) => (typeof x === 'number' && Number.isFinite(x) ? x : 0);
  const time = text(v.time);
  const host = text(v.host);
  if (time === undefined || host === undefined || typeof v.allowed !== 'boolean') return undefined;
  const reason = text(v.reason);
  return {
    time,
    method: text(v.method) ?? '',
    host,
    port: count(v.port),
    allowed: v.allowed,
    rule: text(v.rule) ?? '',
    reason,
    bytesOut: count(v.bytesOut),
    bytesIn: count(v.bytesIn),
  };
}

/** Every egress sandbox's proxy log of a run, in the order its sandboxes were made. */
export async function readEgressLogs(
  run: StoredRun,
): Promise<Array<{ role: string; entries: EgressLine[] }>> {
  const logs: Array<{ role: string; entries: EgressLine[] }> = [];
  for (const container of run.record.containers) {
    if (!container.egress) continue;
    const text = (await readRunFile(run, container.egress.file)) ?? '';
    const entries: EgressLine[] = [];
    for (const line of text.split('\n')) {
      if (!line.trim()) continue;
      try {
        const entry = egressLine(JSON.parse(line));
        if (entry) entries.push(entry);
      } catch {
        // A torn line is skipped.
      }
    }
    logs.push({ role: container.role, entries });
  }
  return logs;
}

export function formatEgressLine(role: string, e: EgressLine): string {
  // eslint-disable-next-line no-control-regex
  const clean = (s: string) => s.replace(/[\x00-\x1f\x7f]/g, '?');
  const verdict = e.allowed ? 'allowed' : 'denied ';
  const what = `${clean(e.method)} ${clean(e.host)}${e.port ? `:${e.port}` : ''}`;
  const detail = e.allowed
    ? `${clean(e.rule)}, ${e.bytesOut} B out, ${e.bytesIn} B in`
    : clean(e.reason ?? e.rule);
  return `${e.time} [egress ${role}] ${verdict} ${what}  ${detail}`;
}
