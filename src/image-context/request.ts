/**
 * The one way to ask for a repo's sandbox image and the one answer, from `fix` through
 * `sandbox/backend-registry.ts` to the backend that builds it: the same field names at every layer,
 * so nothing is renamed (and nothing dropped) on the way down or back up.
 */
import type { EgressPolicy } from '../egress-policy.js';

/** What the host knew of a repo file when its image was built: the apply compares against it. */
export interface HostFileState {
  sha256: string;
  mode: number;
  /** A symlink's sha256 is of its target text; its content is never read through it. */
  type?: 'file' | 'symlink';
}

export interface RepoImageRequest {
  repoDir: string;
  /** What the image is named after: the service (the catalog's `name`); default the repo's folder. */
  name?: string;
  /** A prebuilt image used as it is (catalog `sandbox.image`); it must hold the repo at /workspace. */
  prebuilt?: string;
  /**
   * The recipe (catalog `sandbox.dockerfile`); default the repo's Dockerfile.sandbox, else the
   * harness's own. A relative path is relative to `dockerfileRoot`.
   */
  dockerfile?: string;
  /**
   * The folder `dockerfile` is relative to and must really be in (a regular file, not a link
   * out of it): the catalog's folder for `sandbox.dockerfile`. Default: the repo.
   */
  dockerfileRoot?: string;
  /** Passed as the BASE_IMAGE build argument. Default: the recipe's own, else the node base image. */
  baseImage?: string;
  buildArgs?: Record<string, string>;
  /**
   * Whether build steps may use the network (catalog `sandbox.build.network: true`). Default:
   * no network, so a repo's recipe cannot download or send anything while it builds.
   */
  buildNetwork?: boolean;
  /** The build's steps reach only these names, through a proxy (catalog egress phase `build`). */
  buildEgress?: EgressPolicy;
  /** More build-context exclusions, `.dockerignore` syntax (catalog `sandbox.build.exclude`). */
  excludes?: string[];
  /** Build even when an image with this content hash exists, without the layer cache. */
  rebuild?: boolean;
  /** Where the build's every line goes; default `<cache>/logs/build-<repo>-<hash>.log`. */
  logFile?: string;
  /** Every line of build output (nothing when the image is reused). */
  onProgress?: (line: string) => void;
  /** Skipped symlinks and other oddities of the repo. */
  onWarning?: (message: string) => void;
  /** Ctrl-C: stops the build. */
  signal?: AbortSignal;
  /**
   * How long making the image may take (catalog `sandbox.timeouts.buildSec`), and the file and
   * field that set it, for the message when it passes (`build-limit.ts`).
   */
  timeLimit?: BuildTimeLimit;
}

export interface BuildTimeLimit {
  sec: number;
  /** The file that set it, as shown in messages (a catalog, a Harbor task's task.toml). */
  file: string;
  /** The field in that file (`sandbox.timeouts.buildSec`, `environment.build_timeout_sec`). */
  field: string;
}

export interface RepoImage {
  tag: string;
  imageId: string;
  reused: boolean;
  /** Whether the build steps had network (for the run record); part of the content hash. */
  buildNetwork?: boolean;
  /** What /workspace holds in the image, as the host repo had it: the pristine state. */
  hostFiles: ReadonlyMap<string, HostFileState>;
  /** The base the recipe's final stage starts from (absent for a prebuilt image). */
  baseImage?: string;
  /** The image's size as the engine reports it. */
  sizeBytes?: number | undefined;
  /** The content hash the tag is made from (absent for a prebuilt image). */
  contentHash?: string;
  /** The recipe it was built with (absent for a prebuilt image). */
  dockerfile?: string;
  /** Only when a build ran. */
  logFile?: string;
  /** Skipped symlinks and other oddities of the repo, when the context was scanned. */
  warnings?: string[];
}

/** A repo image the backend built (or found built) from a recipe: the build's facts are known. */
export type BuiltRepoImage = RepoImage &
  Required<Pick<RepoImage, 'buildNetwork' | 'baseImage' | 'contentHash' | 'dockerfile' | 'warnings'>>;
