/**
 * Repo images on the nodes of a cluster. The host scans the repo exactly as for a local build
 * (the same exclusions, secret scan, snapshot and content-hash tag: `image-context/`), and a
 * node builds the image with its own engine from that context, streamed to it over a job step;
 * nothing of the host is mounted on the node. Each node keeps what it built: the next sandbox
 * there finds the tag with its content hash and its base's id in the image's labels and builds
 * nothing. A node whose base image changed since (same tag, another id) builds again, as a
 * local engine does.
 *
 * Where the build runs: in the job of the sandbox that needs it (its node, its allocation), or
 * in a job of its own on a named node when no sandbox has been made yet (the pristine tree).
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { dirname, join, relative, resolve } from 'node:path';
import { Writable } from 'node:stream';
import {
  BuildRefused,
  errorMessage,
  HarnessError,
  ImageError,
  SandboxUnavailable,
  UsageError,
} from '../../errors.js';
import { scanBuildContext, type BuildContext } from '../../image-context/build-context.js';
import { cacheDir } from '../../image-context/cache-dir.js';
import { argDefault, daemonFetches } from '../../image-context/dockerfile.js';
import { defaultRecipe, repoImageTag, repoSlug, resolveDockerfile } from '../../image-context/recipe.js';
import type { BuildTimeLimit, BuiltRepoImage, RepoImageRequest } from '../../image-context/request.js';
import { formatDuration } from '../../format.js';
import { imageRef } from '../../object-names.js';
import { packageRoot } from '../../package-root.js';
import { readRepoFile } from '../../repo-files.js';
import { SLURM_LABEL } from './job-script.js';
import { nodeStep, type NodeStepOptions } from './node-step.js';
import type { SlurmClient } from './slurm-client.js';

/** Where an image is made sure of: in a sandbox's job on its node, or a job of its own on a node. */
export type ImagePlace = { job: string; node: string } | { node: string };

/** What a node needs to build one repo image, kept by tag. */
export interface NodeRecipe {
  tag: string;
  contentHash: string;
  slug: string;
  context: BuildContext;
  buildArgs: Record<string, string>;
  /** The image the recipe starts from, when known: its id on the node goes into the image's labels. */
  baseImage: string | undefined;
  network: boolean;
  /** FROM / COPY --from images a build without network must find on the node (it cannot pull). */
  needed: string[];
  rebuild: boolean;
  logFile: string;
  timeLimit: BuildTimeLimit | undefined;
  onProgress: ((line: string) => void) | undefined;
}

/**
 * On a node, without stdin: `reused` when the tag there carries this content hash and was built
 * on the base the node has now, else `build`. $1 engine CLI, $2 tag, $3 content hash, $4 base.
 */
const CHECK_SCRIPT = `cli=$1; tag=$2; hash=$3; base=$4
baseid=
if [ -n "$base" ]; then
  baseid=$("$cli" image inspect -f '{{.Id}}' "$base" 2>/dev/null) || { echo "base image $base is not on node \${SLURMD_NODENAME:-$(hostname)}" >&2; exit 45; }
fi
have=$("$cli" image inspect -f '{{index .Config.Labels "${SLURM_LABEL.contentHash}"}}|{{index .Config.Labels "${SLURM_LABEL.baseId}"}}' "$tag" 2>/dev/null)
if [ "$have" = "$hash|$baseid" ]; then echo reused; else echo build; fi
`;

/**
 * On a node, the context's tar on stdin: the build. $1 engine CLI, $2 tag, $3 content hash, $4
 * base, $5 network (none|default), $6 the recipe's path in the context, $7 the repo's name, $8
 * no-cache (0|1), $9 how many images follow that must be on the node, then those images, then
 * the build arguments (KEY=VALUE). The last line says `sandbox-harness: built <hash>`: a step
 * whose node was lost ends with srun's exit 0 and without it.
 */
const BUILD_SCRIPT = `cli=$1; tag=$2; hash=$3; base=$4; net=$5; df=$6; repo=$7; nocache=$8; n=$9; shift 9
while [ "$n" -gt 0 ]; do
  "$cli" image inspect "$1" >/dev/null 2>&1 || { echo "image $1 is not on node \${SLURMD_NODENAME:-$(hostname)}, and this build has no network to pull it" >&2; exit 46; }
  shift; n=$((n - 1))
done
baseid=
if [ -n "$base" ]; then
  baseid=$("$cli" image inspect -f '{{.Id}}' "$base" 2>/dev/null) || { echo "base image $base is not on node \${SLURMD_NODENAME:-$(hostname)}" >&2; exit 45; }
fi
for a; do shift; set -- "$@" --build-arg "$a"; done
[ "$nocache" = 1 ] && set -- "$@" --no-cache
"$cli" build --network "$net" -f "$df" -t "$tag" \\
  --label ${SLURM_LABEL.marker}=1 --label ${SLURM_LABEL.kind}=repo --label "${SLURM_LABEL.contentHash}=$hash" \\
  --label "${SLURM_LABEL.baseId}=$baseid" --label "${SLURM_LABEL.repo}=$repo" --label "${SLURM_LABEL.buildNetwork}=$net" \\
  "$@" - 2>&1 || exit 47
echo "sandbox-harness: built $hash"
`;

/** Build output kept for the log and the failure message (the tail, when there is more). */
const MAX_BUILD_OUTPUT = 4 * 1024 * 1024;
/** A build with no `sandbox.timeouts.buildSec`: Slurm's own bound for an operator job is longer. */
const DEFAULT_BUILD_MS = 60 * 60_000;

/**
 * The repo images of this process's requests and where they are already known to be: one
 * make-sure per node and tag (a node's check and build run once however many sandboxes ask).
 */
export class NodeImages {
  private readonly recipes = new Map<string, NodeRecipe>();
  private readonly onNodes = new Map<string, Promise<void>>();

  constructor(private readonly client: SlurmClient) {}

  /**
   * The host's half of a repo image: the context scanned (secrets refused), the tag and the
   * pristine snapshot. Nothing is built here: the node that runs a sandbox builds it first.
   */
  async prepare(request: RepoImageRequest): Promise<BuiltRepoImage> {
    if (request.buildEgress) {
      throw new UsageError('the slurm backend cannot give an image build egress by name', {
        hint: "Build with --backend docker, or drop the build phase from the catalog's sandbox.egress.",
      });
    }
    if (request.baseImage !== undefined)
      imageRef(request.baseImage, 'the base image (sandbox.baseImage, --base-image)');
    const repoDir = resolve(request.repoDir);
    const dockerfile = await resolveDockerfile(repoDir, request.dockerfile, request.dockerfileRoot);
    const ours = dockerfile === defaultRecipe();
    const dockerfileRoot = ours ? packageRoot() : resolve(request.dockerfileRoot ?? repoDir);
    const baseImage = request.baseImage ?? (await declaredBase(dockerfileRoot, dockerfile));
    const network = request.buildNetwork === true;
    const buildArgs = { ...(baseImage ? { BASE_IMAGE: baseImage } : {}), ...request.buildArgs };
    const context = await scanBuildContext({
      contextDir: repoDir,
      dockerfile,
      dockerfileRoot,
      buildArgs,
      ...(request.excludes ? { extraExcludes: request.excludes } : {}),
      // The base by name: its id is the node's, checked there against the image's label.
      hashInputs: { baseImage: baseImage ?? '', buildNetwork: network ? 'default' : 'none' },
      ...(request.onWarning ? { onWarning: request.onWarning } : {}),
    });
    const needed: string[] = [];
    if (!network) {
      // Network none only holds for the build's steps: the node's daemon itself would download
      // an ADD source or pull a missing FROM image over the node's network.
      for (const fetch of daemonFetches(context.dockerfileBytes.toString('utf8'), buildArgs)) {
        const where = `${dockerfile}:${fetch.line}: ${fetch.instruction}`;
        if (fetch.kind === 'add-url') {
          throw new BuildRefused(
            `${where}\n  ADD of ${fetch.ref} is downloaded by the node's Docker daemon over its network, and this build has no network`,
            {
              hint: 'Bring the file with the repo and COPY it, or let image builds use the network with `sandbox.build: { network: true }` in the catalog.',
            },
          );
        }
        needed.push(imageRef(fetch.ref, `${where}: its image`));
      }
    }
    const slug = repoSlug(repoDir, request.name);
    const tag = repoImageTag(repoDir, context.contentHash, request.name);
    this.recipes.set(tag, {
      tag,
      contentHash: context.contentHash,
      slug,
      context,
      buildArgs,
      baseImage,
      network,
      needed: [...new Set(needed)],
      rebuild: request.rebuild === true,
      logFile:
        request.logFile ??
        join(cacheDir(), 'logs', `build-${slug}-${context.contentHash.slice(0, 16)}-slurm.log`),
      timeLimit: request.timeLimit,
      onProgress: request.onProgress,
    });
    return {
      tag,
      // An image's id is each node's own; the tag (content hash) is what names it everywhere.
      imageId: tag,
      reused: false,
      hostFiles: context.snapshot,
      contentHash: context.contentHash,
      dockerfile,
      baseImage: baseImage ?? '',
      buildNetwork: network,
      warnings: context.warnings,
    };
  }

  /** Whether `image` is a repo image this process builds on the nodes. */
  knows(image: string): boolean {
    return this.recipes.has(image);
  }

  /** The image is on the place's node, built there from its context when it is not (or is stale). */
  async ensure(place: ImagePlace, image: string, signal?: AbortSignal): Promise<void> {
    const recipe = this.recipes.get(image);
    if (!recipe) return;
    const key = `${place.node}|${image}`;
    let pending = this.onNodes.get(key);
    if (!pending) {
      pending = this.ensureOnNode(place, recipe, signal);
      this.onNodes.set(key, pending);
      pending.catch(() => this.onNodes.delete(key));
    }
    return pending;
  }

  /** The node lost what it had (its image removed): the next `ensure` there looks again. */
  forget(node: string, image: string): void {
    this.onNodes.delete(`${node}|${image}`);
  }

  private async ensureOnNode(place: ImagePlace, recipe: NodeRecipe, signal?: AbortSignal): Promise<void> {
    const cli = this.client.engineCli;
    const step = (options: NodeStepOptions) => ({ ...options, ...(signal ? { signal } : {}) });
    if (!recipe.rebuild) {
      const check = await nodeStep(
        this.client,
        place,
        CHECK_SCRIPT,
        [cli, recipe.tag, recipe.contentHash, recipe.baseImage ?? ''],
        step({ timeoutMs: 120_000 }),
      );
      if (check.code === 45) throw baseMissing(recipe, place.node);
      const said = check.stdout.toString().trim();
      if (check.code !== 0 || !['reused', 'build'].includes(said)) {
        throw new SandboxUnavailable(
          `checking image ${recipe.tag} on node ${place.node} failed (exit ${check.code}): ${check.stderr.trim().slice(-300)}`,
        );
      }
      if (said === 'reused') return;
    }
    await this.build(place, recipe, signal);
  }

  private async build(place: ImagePlace, recipe: NodeRecipe, signal?: AbortSignal): Promise<void> {
    const output = new TailBuffer(MAX_BUILD_OUTPUT, recipe.onProgress);
    const { stream, done } = recipe.context.createTar();
    done.catch(() => undefined);
    const limitMs = recipe.timeLimit ? recipe.timeLimit.sec * 1000 : DEFAULT_BUILD_MS;
    const started = Date.now();
    const result = await nodeStep(
      this.client,
      place,
      BUILD_SCRIPT,
      [
        this.client.engineCli,
        recipe.tag,
        recipe.contentHash,
        recipe.baseImage ?? '',
        recipe.network ? 'default' : 'none',
        recipe.context.dockerfileInContext,
        recipe.slug,
        recipe.rebuild ? '1' : '0',
        String(recipe.needed.length),
        ...recipe.needed,
        ...Object.entries(recipe.buildArgs).map(([k, v]) => `${k}=${v}`),
      ],
      { stdin: stream, stdout: output, timeoutMs: limitMs, ...(signal ? { signal } : {}) },
    );
    const text = output.text();
    await writeLog(recipe.logFile, `# building ${recipe.tag} on node ${place.node}\n${text}`);
    // The context must have streamed whole and unchanged: a file that changed since the scan
    // fails it, and whatever the node made of it is not this tag's content.
    try {
      await done;
    } catch (error) {
      if (error instanceof HarnessError) throw error;
      throw new ImageError(`sending the build context of ${recipe.tag} failed: ${errorMessage(error)}`);
    }
    if (result.code === 45) throw baseMissing(recipe, place.node);
    if (result.code === 46) {
      throw new BuildRefused(`${result.stderr.trim().split('\n').pop() ?? ''} (building ${recipe.tag})`, {
        hint: "Load that image into the node's engine first, or let image builds use the network with `sandbox.build: { network: true }` in the catalog.",
      });
    }
    if (Date.now() - started >= limitMs) {
      const why = recipe.timeLimit
        ? `its limit of ${recipe.timeLimit.sec}s (${recipe.timeLimit.file}: ${recipe.timeLimit.field})`
        : formatDuration(limitMs);
      throw new ImageError(`building ${recipe.tag} on node ${place.node} took longer than ${why}`, {
        hint: `See the build log: ${recipe.logFile}`,
      });
    }
    if (result.code === 0 && text.trimEnd().endsWith(`sandbox-harness: built ${recipe.contentHash}`)) return;
    if (result.code === 47) {
      const lines = text.trimEnd().split('\n');
      const step = [...lines].reverse().find((l) => /^Step \d+\/\d+ : /.test(l));
      throw new ImageError(
        `building ${recipe.tag} on node ${place.node} failed${step ? ` at ${step.slice(0, 200)}` : ''}:\n${lines.slice(-12).join('\n')}`,
        { hint: `The whole build log: ${recipe.logFile}` },
      );
    }
    throw new SandboxUnavailable(
      `the build of ${recipe.tag} on node ${place.node} ended without finishing (exit ${result.code}; the node may be lost): ${result.stderr.trim().slice(-300)}`,
    );
  }
}

function baseMissing(recipe: NodeRecipe, node: string): ImageError {
  return new ImageError(`base image ${recipe.baseImage ?? ''} is not on node ${node}`, {
    hint: "Load it into every node's engine (`docker save IMAGE | ssh NODE docker load`), or pull it there from the cluster's registry.",
  });
}

/** The `ARG BASE_IMAGE=<default>` of a recipe, read without following a link out of its folder. */
async function declaredBase(root: string, dockerfile: string): Promise<string | undefined> {
  const text = await readRepoFile(root, relative(root, dockerfile), 'Dockerfile', {
    rootName: 'its folder',
    error: (message, hint) => new BuildRefused(message, { hint }),
  });
  const declared = argDefault(text.toString('utf8'), 'BASE_IMAGE');
  if (!declared) return undefined;
  return imageRef(declared.value, `${dockerfile}:${declared.line}: the recipe's ARG BASE_IMAGE default`);
}

async function writeLog(file: string, text: string): Promise<void> {
  await mkdir(dirname(file), { recursive: true });
  await writeFile(file, text);
}

/** Keeps the last `max` bytes written, and passes each line on as it comes. */
class TailBuffer extends Writable {
  private chunks: Buffer[] = [];
  private size = 0;
  private partial = '';

  constructor(
    private readonly max: number,
    private readonly onLine: ((line: string) => void) | undefined,
  ) {
    super();
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, callback: (error?: Error | null) => void): void {
    this.chunks.push(chunk);
    this.size += chunk.length;
    while (this.size > this.max && this.chunks.length > 1) this.size -= this.chunks.shift()!.length;
    if (this.onLine) {
      const lines = (this.partial + chunk.toString('utf8')).split('\n');
      this.partial = lines.pop() ?? '';
      for (const line of lines) this.onLine(line);
    }
    callback();
  }

  text(): string {
    return Buffer.concat(this.chunks).toString('utf8');
  }
}
