/**
 * Offline base images: when no registry answers, a root filesystem is made from Debian
 * packages with mmdebstrap and imported into the engine (`docker import`). Only Debian's
 * package mirror has to be reachable, from the host; nothing inside a container needs
 * network. Everything here runs host tools, so it stays out of the sandbox code.
 */
import { createReadStream } from 'node:fs';
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ImageError } from '../../../errors.js';
import type { DockerEngine } from '../engine/index.js';
import { findOnPath, isDebianRoot, runStreaming, type RunOptions } from '../host-tools.js';
import { BASE_LABEL, LABEL } from '../labels.js';
import type { LogFile } from './build-log.js';

/** Finds mmdebstrap, installing it with apt-get when this is Debian and we are root. */
export async function ensureMmdebstrap(options: RunOptions): Promise<string> {
  const found = await findOnPath('mmdebstrap');
  if (found) return found;
  if (!(await isDebianRoot())) {
    throw new ImageError(
      'no registry image could be pulled, and the offline bootstrap needs mmdebstrap, which is not installed',
      {
        hint: 'Install it (Debian/Ubuntu: `sudo apt-get install -y mmdebstrap`), or make the registry reachable so the base image can be pulled.',
      },
    );
  }
  options.onLine('installing mmdebstrap with apt-get');
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  let code = await runStreaming('apt-get', ['install', '-y', 'mmdebstrap'], { ...options, env });
  if (code !== 0) {
    // Usually the package lists were never downloaded on this machine.
    code = await runStreaming('apt-get', ['update'], { ...options, env });
    if (code === 0)
      code = await runStreaming('apt-get', ['install', '-y', 'mmdebstrap'], { ...options, env });
  }
  const installed = await findOnPath('mmdebstrap');
  if (code !== 0 || !installed) {
    throw new ImageError(`apt-get could not install mmdebstrap (exit ${code})`, {
      hint: 'Run `apt-get update && apt-get install -y mmdebstrap` and read its output; the Debian mirror must be reachable.',
    });
  }
  return installed;
}

export interface RootfsSpec {
  /** Debian suite: trixie has Node 20 (bookworm only has 18). */
  suite: string;
  packages: string[];
  repo: string;
  tag: string;
  /** Label value that says what the rootfs is for (e.g. `node`). */
  purpose: string;
}

export interface BootstrapOptions {
  onLine: (line: string) => void;
  log: LogFile;
  signal?: AbortSignal | undefined;
}

const IMPORT_CHANGES = [
  'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
  'ENV LANG=C.UTF-8',
  'CMD ["/bin/bash"]',
];

/**
 * mmdebstrap into a temp dir, then `docker import` as `<repo>:<tag>`. The temp dir goes
 * away whatever happens. Returns the image reference.
 */
export async function bootstrapRootfs(
  engine: DockerEngine,
  spec: RootfsSpec,
  options: BootstrapOptions,
): Promise<string> {
  const both = (line: string) => {
    options.log.line(line);
    options.onLine(line);
  };
  const mmdebstrap = await ensureMmdebstrap({ onLine: both, signal: options.signal });
  const work = await mkdtemp(join(tmpdir(), 'sandbox-harness-rootfs-'));
  // apt drops to user _apt for downloads; a 0700 temp dir would make it fall back to root.
  await chmod(work, 0o755);
  const tarPath = join(work, 'rootfs.tar');
  const ref = `${spec.repo}:${spec.tag}`;
  try {
    const args = ['--variant=minbase', `--include=${spec.packages.join(',')}`, spec.suite, tarPath];
    // A local mirror (apt-cacher, corporate proxy) when the default one is not reachable.
    const mirror = process.env.SANDBOX_HARNESS_DEBIAN_MIRROR;
    if (mirror) args.push(mirror);
    both(`$ ${mmdebstrap} ${args.join(' ')}`);
    const env = { ...process.env, TMPDIR: work };
    const code = await runStreaming(mmdebstrap, args, { onLine: both, env, signal: options.signal });
    if (code !== 0) {
      throw new ImageError(
        [
          `mmdebstrap failed (exit ${code}) while bootstrapping ${ref} from Debian ${spec.suite}`,
          'last output:',
          ...options.log.lastLines(15).map((l) => `  ${l}`),
          `full log: ${options.log.path}`,
        ].join('\n'),
        {
          hint: 'The Debian mirror must be reachable from this host (set SANDBOX_HARNESS_DEBIAN_MIRROR to use another), and mmdebstrap needs root or working user namespaces.',
          details: { logFile: options.log.path },
        },
      );
    }
    both(`importing ${tarPath} as ${ref}`);
    await engine.images.import(createReadStream(tarPath), spec.repo, spec.tag, [
      ...IMPORT_CHANGES,
      `LABEL ${LABEL.marker}=1 ${LABEL.kind}=rootfs ${BASE_LABEL}=${spec.purpose} sandbox-harness.suite=${spec.suite}`,
    ]);
    return ref;
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}
