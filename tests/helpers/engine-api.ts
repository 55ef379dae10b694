/**
 * Read-only Docker Engine API calls for tests that check, from the host, what the daemon
 * really holds (container config, image config and history, cgroup stats), without going
 * through the harness's own engine wrapper they are meant to check. Plain HTTP on the
 * daemon's socket (or `DOCKER_HOST=tcp://`), API 1.41 as on these machines.
 */
import { request } from 'node:http';

const API = '/v1.41';

function endpoint(): { socketPath: string } | { host: string; port: number } {
  const host = process.env.DOCKER_HOST;
  if (!host) return { socketPath: '/var/run/docker.sock' };
  if (host.startsWith('unix://')) return { socketPath: host.slice('unix://'.length) };
  const url = new URL(host.replace(/^tcp:/, 'http:'));
  return { host: url.hostname, port: Number(url.port || 2375) };
}

/**
 * GET `path` (e.g. `/containers/<id>/json`) and parse the JSON; 404 gives undefined. `socketPath`
 * asks another engine than the environment's (a Podman service, a second dockerd).
 */
export function engineGet<T>(path: string, socketPath?: string): Promise<T | undefined> {
  return new Promise((resolve, reject) => {
    const where = socketPath ? { socketPath } : endpoint();
    const req = request({ ...where, path: `${API}${path}`, method: 'GET' }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        if (res.statusCode === 404) return resolve(undefined);
        if (res.statusCode !== 200) return reject(new Error(`GET ${path}: ${res.statusCode} ${text}`));
        try {
          resolve(JSON.parse(text) as T);
        } catch (error) {
          reject(error as Error);
        }
      });
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}

export interface CpuStats {
  /** Nanoseconds of CPU the container's cgroup used. */
  usageNs: number;
  /** CFS periods in which the cgroup hit its quota and was throttled. */
  throttledPeriods: number;
}

/** One sample of a container's cgroup CPU accounting. */
export async function cpuStats(id: string, socketPath?: string): Promise<CpuStats> {
  const stats = await engineGet<{
    cpu_stats?: { cpu_usage?: { total_usage?: number }; throttling_data?: { throttled_periods?: number } };
  }>(`/containers/${id}/stats?stream=false&one-shot=true`, socketPath);
  const usage = stats?.cpu_stats?.cpu_usage?.total_usage;
  const throttled = stats?.cpu_stats?.throttling_data?.throttled_periods;
  if (usage === undefined || throttled === undefined)
    throw new Error(`no cgroup CPU stats for container ${id}: ${JSON.stringify(stats)}`);
  return { usageNs: usage, throttledPeriods: throttled };
}
