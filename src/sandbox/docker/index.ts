/**
 * The Docker backend's public names, for the registry's callers' tests and the benchmarks:
 * the backend, its engine client, its images and its labels. Code in src/ above the sandbox
 * seam reaches none of this except through src/sandbox/backend-registry.ts.
 */
export { DockerBackend, DockerSandbox, dockerBackend } from './docker-sandbox.js';
export { dockerEngine, DockerEngine } from './engine/index.js';
export { collectGarbage, reapOrphans } from './operator/collect-garbage.js';
export { LABEL, KEPT_NAME_PREFIX, SESSION_ID } from './labels.js';
export { BASE_IMAGES, DEFAULT_BASE_IMAGE } from './images/base-images.js';
export { ensureBaseImage } from './images/ensure-base.js';
export { buildRepoImage } from './images/repo-image.js';
export { shipImages } from './images/image-shipping.js';
