export { DockerBackend, DockerSandbox, dockerBackend } from './docker-sandbox.js';
export { dockerEngine, DockerEngine } from './engine/index.js';
export { collectGarbage, reapOrphans } from './gc.js';
export { LABEL, KEPT_NAME_PREFIX, SESSION_ID } from './labels.js';
