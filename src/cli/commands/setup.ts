/**
 * `sandbox-harness setup`: make the Docker engine answer (on Debian as root: install
 * docker.io and start dockerd, via scripts/ensure-docker.sh; elsewhere: say what to do),
 * then make sure the node base image exists. Quiet and quick when all is well.
 */
import { spawn } from 'node:child_process';
import { access } from 'node:fs/promises';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { Command, Option } from '@commander-js/extra-typings';
import { SandboxUnavailable, UsageError } from '../../errors.js';
import type { BaseKind, EnsureBaseImageResult, GvisorSetupResult } from '../../sandbox/backend-registry.js';
import { note, print, printJson, type CliContext } from '../cli-context.js';
import { declareCommand, type OptionsOf } from '../declare-command.js';
import { describeEnsureResult, imagesEnsure } from './images.js';

/** The one runtime setup knows how to add; any other is refused before anything is done. */
function setupRuntime(value: string): 'runsc' {
  if (value !== 'runsc') {
    throw new UsageError(`--runtime: setup knows how to add runsc (gVisor), got "${value}"`, {
      hint: "Register another runtime in the engine's daemon.json yourself; `sandbox-harness doctor` then probes it.",
    });
  }
  return value;
}

function declaration() {
  return new Command('setup')
    .description(
      'make the Docker engine answer: on Debian as root, install docker.io and start dockerd; elsewhere say what to do',
    )
    .addOption(
      new Option(
        '--runtime <name>',
        'also add this runtime to the local engine: runsc (gVisor) installs the Debian package, merges it into /etc/docker/daemon.json, reloads dockerd (SIGHUP) and checks a sandbox runs under it',
      ).argParser(setupRuntime),
    )
    .option('--json', 'JSON output');
}

export interface SetupOptions {
  /** Base images to ensure after the engine answers (default: node). Empty: none. */
  kinds?: BaseKind[];
  /** Bootstrap base images from Debian packages without trying the registry. */
  offline?: boolean;
  /** No progress output. */
  quiet?: boolean;
  /** Also set up this OCI runtime on the local engine (`runsc`: gVisor). */
  runtime?: 'runsc';
}

export interface SetupResult {
  endpoint: string;
  /** `answering`: nothing had to be done; `started`: the set-up script made it answer. */
  engine: 'answering' | 'started';
  baseImages: EnsureBaseImageResult[];
  /** What `--runtime runsc` did. */
  gvisor?: GvisorSetupResult;
}

export type SetupCommandOptions = OptionsOf<typeof declaration>;

async function runEnsureDocker(
  ctx: CliContext,
  quiet: boolean,
  dockerEndpoint: () => string,
): Promise<{ code: number; output: string[] }> {
  const { packageRoot } = await import('../../sandbox/backend-registry.js');
  const script = join(packageRoot(), 'scripts', 'ensure-docker.sh');
  try {
    await access(script);
  } catch {
    throw new SandboxUnavailable(
      `no Docker engine answers at ${dockerEndpoint()}, and ${script} is missing`,
      {
        hint: 'Install and start Docker Engine (https://docs.docker.com/engine/install/), or point DOCKER_HOST at a running engine.',
      },
    );
  }
  const output: string[] = [];
  const code = await new Promise<number>((resolve, reject) => {
    const child = spawn('bash', [script], { stdio: ['ignore', 'pipe', 'pipe'], env: ctx.env });
    for (const stream of [child.stdout, child.stderr]) {
      createInterface({ input: stream }).on('line', (line) => {
        output.push(line);
        if (!quiet) note(ctx, line);
      });
    }
    child.once('error', reject);
    child.once('close', (exitCode) => resolve(exitCode ?? 1));
  });
  return { code, output };
}

export async function setUpEngine(ctx: CliContext, options: SetupOptions = {}): Promise<SetupResult> {
  const { DEFAULT_BASE_IMAGE, dockerOnly } = await import('../../sandbox/backend-registry.js');
  // Setting up an engine is the Docker backend's alone: it starts dockerd.
  const docker = await dockerOnly();
  const dockerEndpoint = docker.localEndpoint;
  let state: SetupResult['engine'] = 'answering';
  try {
    await docker.pingLocal(3000);
  } catch {
    const { code, output } = await runEnsureDocker(ctx, options.quiet ?? false, dockerEndpoint);
    if (code !== 0) {
      const said = output.map((l) => l.replace(/^ensure-docker: ?/, '')).filter((l) => l.trim() !== '');
      throw new SandboxUnavailable(
        `no Docker engine answers at ${dockerEndpoint()}, and set-up could not start one`,
        {
          hint: said.slice(-12).join('\n') || 'Run `bash scripts/ensure-docker.sh` to see why.',
        },
      );
    }
    await docker.pingLocal(10_000);
    state = 'started';
  }
  const baseImages: EnsureBaseImageResult[] = [];
  for (const kind of options.kinds ?? ['node']) {
    baseImages.push(
      await imagesEnsure(ctx, { kind, offline: options.offline ?? false, quiet: options.quiet ?? false }),
    );
  }
  let gvisor: GvisorSetupResult | undefined;
  if (options.runtime !== undefined) {
    const image = baseImages.find((b) => b.kind === 'node')?.tag ?? DEFAULT_BASE_IMAGE;
    gvisor = await docker.setUpGvisor({
      image,
      ...(options.quiet ? {} : { say: (line: string) => note(ctx, `setup: ${line}`) }),
    });
  }
  return { endpoint: dockerEndpoint(), engine: state, baseImages, ...(gvisor ? { gvisor } : {}) };
}

export async function setupCommand(ctx: CliContext, options: SetupCommandOptions): Promise<number> {
  const result = await setUpEngine(ctx, {
    quiet: options.json === true,
    ...(options.runtime ? { runtime: options.runtime } : {}),
  });
  if (options.json) {
    printJson(ctx, result);
    return 0;
  }
  print(
    ctx,
    `Docker engine ${result.engine === 'started' ? 'started and answering' : 'answering'} at ${result.endpoint}`,
  );
  for (const image of result.baseImages) print(ctx, await describeEnsureResult(image));
  if (result.gvisor) {
    const g = result.gvisor;
    print(
      ctx,
      `runsc (gVisor): ${g.installed ? 'installed, ' : ''}${g.registered ? 'registered, ' : 'already registered, '}${g.reloaded ? 'engine reloaded, ' : ''}a hardened sandbox ran under it (kernel ${g.probe.kernel ?? '?'})`,
    );
  }
  return 0;
}

export const setup = declareCommand(declaration, setupCommand);
