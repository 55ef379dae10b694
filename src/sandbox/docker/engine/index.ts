/** The engine client: the names the rest of the Docker backend uses (nothing here is a dockerode type). */
export { DockerEngine, dockerEngine, type EngineInfo } from './docker-engine.js';
export {
  EngineContainers,
  type ContainerDetails,
  type ContainerSummary,
  type RawChange,
} from './containers.js';
export {
  isConnectionError,
  NetworkConflict,
  statusOf,
  StorageQuotaUnsupported,
  translateDaemonError,
} from './daemon-errors.js';
export { EngineExec, type ExecStartOptions, type RunningExec } from './exec-sessions.js';
export { EngineImages, type BuildOptions, type ImageDetails, type ImageSummary } from './image-store.js';
export { EngineNetworks, type NetworkCreateOptions, type NetworkSummary } from './networks.js';
