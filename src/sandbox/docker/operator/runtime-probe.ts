/**
 * A runtime judged by what a hardened probe sandbox sees under it (uid, capabilities, network
 * interfaces, kernel), never by its name: `doctor` and `setup --runtime runsc` both ask this.
 */
import { errorMessage } from '../../../errors.js';
import { DEFAULT_RESOURCES } from '../../types.js';
import type { DockerEngine, EngineInfo } from '../engine/index.js';
import { isGvisor, processLimits } from '../runtimes.js';
import { runProbe } from './probe-container.js';

/** What a probe of one runtime found: whether a hardened sandbox held its baseline under it. */
export interface RuntimeProbe {
  runtime: string;
  /** The sandbox started and held the baseline (non-root, no capabilities, no network but lo). */
  holdsBaseline: boolean;
  /** The kernel the sandbox sees (`4.4.0` is gVisor's). */
  kernel?: string;
  /** What is different or wrong, in words. */
  notes: string[];
}

/**
 * Run inside a probe sandbox: uid, effective capabilities, network interfaces, kernel, and
 * whether coreutils' stat works (gVisor before 2023 refuses its statx flags).
 */
export const RUNTIME_PROBE_SCRIPT = [
  'echo "uid=$(id -u)"',
  'echo "cap=$(awk \'/^CapEff/ {print $2}\' /proc/self/status)"',
  'echo "net=$(awk -F: \'NR>2 {gsub(/ /, "", $1); printf "%s,", $1}\' /proc/net/dev)"',
  'echo "kernel=$(uname -r)"',
  'if stat / >/dev/null 2>&1; then echo stat=ok; else echo stat=fails; fi',
].join('; ');

/** Reads what RUNTIME_PROBE_SCRIPT printed. */
export function readRuntimeProbe(runtime: string, output: string): RuntimeProbe {
  const facts = new Map(
    output
      .split('\n')
      .map((line) => line.split('='))
      .filter((parts) => parts.length >= 2)
      .map(([key, ...rest]) => [key!, rest.join('=')] as const),
  );
  const notes: string[] = [];
  const uid = facts.get('uid');
  const cap = facts.get('cap') ?? '';
  const net = (facts.get('net') ?? '').split(',').filter(Boolean);
  if (uid === undefined || uid === '0')
    notes.push(`commands ran as uid ${uid ?? 'unknown'}, not the sandbox user`);
  if (!/^0+$/.test(cap)) notes.push(`commands kept capabilities (${cap || 'unknown'})`);
  if (net.join(',') !== 'lo') notes.push(`network interfaces ${net.join(', ') || 'unknown'}, not only lo`);
  const kernel = facts.get('kernel');
  if (kernel === '4.4.0') notes.push("gVisor's own kernel (4.4.0) between the sandbox and the host");
  if (facts.get('stat') === 'fails')
    notes.push(
      "coreutils' stat and ls (even a plain `ls DIR`) fail with EINVAL (this gVisor refuses their statx flags): the harness does not use them, an agent's command may; a gVisor from 2023 on does not",
    );
  const holdsBaseline = uid !== undefined && uid !== '0' && /^0+$/.test(cap) && net.join(',') === 'lo';
  return { runtime, holdsBaseline, ...(kernel ? { kernel } : {}), notes };
}

/** One hardened probe sandbox under `runtime`; what it saw inside. */
export async function probeRuntime(
  engine: DockerEngine,
  info: EngineInfo,
  image: string,
  runtime: string,
  timeoutMs = 30_000,
): Promise<RuntimeProbe> {
  try {
    const processes = processLimits(DEFAULT_RESOURCES.pids, isGvisor(info, runtime));
    const probe = await runProbe(engine, {
      image,
      role: 'doctor-runtime',
      runtime,
      limits: {
        memoryBytes: 256 * 1024 * 1024,
        nanoCpus: 1e9,
        pids: processes.pids,
        nproc: processes.nproc,
        maxFileBytes: 1024 * 1024,
        tmpfsBytes: 1024 * 1024,
        nofile: 1024,
      },
      // Podman takes no runtime per container: its probe is of the service's own.
      ...(info.product === 'docker' ? { engineRuntime: runtime } : {}),
      script: RUNTIME_PROBE_SCRIPT,
      timeoutMs,
    });
    return readRuntimeProbe(runtime, probe.stdout);
  } catch (error) {
    return {
      runtime,
      holdsBaseline: false,
      notes: [`a hardened sandbox did not run: ${errorMessage(error).split('\n')[0]}`],
    };
  }
}
