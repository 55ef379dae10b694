/**
 * The sandbox contract on the local Docker engine under its default runtime (runc): the
 * `Sandbox` conformance suite, the file contract three ways (layers on this host, the
 * command channel, scripts inside), and what is special to Docker. The same file runs under
 * other engines and runtimes (`runsc.test.ts`, `podman.test.ts`, `userns.test.ts`).
 */
import { describeDockerConformance, localTarget } from './docker-targets.js';

describeDockerConformance(localTarget());
