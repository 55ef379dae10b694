/**
 * The one probe loop of the operator commands: a hardened container made as a sandbox would
 * be (its user, its folder, limits, no network), started, one script run in it as an exec
 * (its logs are off like every sandbox's), the exec's state polled until it ends or the time
 * is up, and the container removed whatever happened.
 */
import { randomBytes } from 'node:crypto';
import { formatDuration } from '../../../format.js';
import { BoundedBuffer } from '../../posix/sinks.js';
import { SANDBOX_GID, SANDBOX_UID, WORKSPACE } from '../../types.js';
import {
  hardenedContainer,
  type ContainerLimits,
  type ContainerRequest,
} from '../../container/container-spec.js';
import type { ContainerDetails, DockerEngine } from '../engine/index.js';
import { containerLabels } from '../labels.js';

const SANDBOX_USER = `${SANDBOX_UID}:${SANDBOX_GID}`;

export type ProbeLimits = Omit<ContainerLimits, 'diskBytes'>;

export interface ProbeContainer {
  image: string;
  /** The label role: what the probe is for (`doctor`, `doctor-runtime`). */
  role: string;
  /** The runtime the probe is of, for its labels. */
  runtime?: string | undefined;
  /** The runtime the engine is asked for; absent: the engine's default. */
  engineRuntime?: string | undefined;
  limits: ProbeLimits;
}

/** A probe container's request: what `runProbe` makes, and what a check that only creates one makes. */
export function probeContainerRequest(probe: ProbeContainer): ContainerRequest {
  return {
    name: `sandbox-harness-doctor-${randomBytes(4).toString('hex')}`,
    image: probe.image,
    entrypoint: ['sleep'],
    cmd: ['60'],
    user: SANDBOX_USER,
    workingDir: WORKSPACE,
    env: ['LANG=C.UTF-8'],
    labels: containerLabels({ runId: 'doctor', role: probe.role, runtime: probe.runtime }),
    ...probe.limits,
    runtime: probe.engineRuntime,
  };
}

export interface ProbeRequest extends ProbeContainer {
  script: string;
  /** For the whole probe, from the container's creation to the script's end. */
  timeoutMs: number;
  /** What the started container must look like before the script runs (throws to fail the probe). */
  check?: (details: ContainerDetails) => void;
}

export interface ProbeResult {
  exitCode: number;
  /** At most 4 KiB: what the script printed. */
  stdout: string;
  elapsedMs: number;
}

/** Runs `script` in a fresh probe container; throws when the container or the script did not run. */
export async function runProbe(engine: DockerEngine, request: ProbeRequest): Promise<ProbeResult> {
  const started = Date.now();
  let id: string | undefined;
  try {
    id = await engine.containers.create(hardenedContainer(probeContainerRequest(request)));
    await engine.containers.start(id);
    const details = await engine.containers.inspect(id);
    if (!details?.running) throw new Error(`the container did not start (${details?.status ?? 'gone'})`);
    request.check?.(details);
    const out = new BoundedBuffer(4096);
    const running = await engine.exec.start(id, {
      cmd: ['sh', '-c', request.script],
      user: SANDBOX_USER,
      workingDir: WORKSPACE,
      env: [],
      stdout: out,
      stderr: new BoundedBuffer(1024),
    });
    let exitCode: number;
    for (;;) {
      const exec = await running.inspect();
      if (!exec.running && exec.exitCode !== null) {
        exitCode = exec.exitCode;
        break;
      }
      if (Date.now() - started > request.timeoutMs)
        throw new Error(`a command in it did not finish within ${formatDuration(request.timeoutMs)}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    await Promise.race([running.streamEnded, new Promise((r) => setTimeout(r, 1000))]);
    running.detach();
    return { exitCode, stdout: out.bytes().toString('utf8'), elapsedMs: Date.now() - started };
  } finally {
    if (id) await engine.containers.remove(id).catch(() => undefined);
  }
}
