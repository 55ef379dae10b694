/**
 * The sandbox contract on the local engine under gVisor (`runsc`): the same suite as runc.
 * What gVisor does differently is checked, not skipped: its own kernel (`uname -r` 4.4.0),
 * its own /proc (pid 1's environment is the sandbox's init, never a host process's), its own
 * ptrace; writes reach the writable layer as with runc, which the layer-read check proves on
 * every run (the marker and the change list come from the layer, with no exec).
 * `scripts/setup.sh` registers runsc on the engine (`sandbox-harness setup --runtime runsc`).
 */
import { describeDockerConformance, localTarget } from './docker-targets.js';

describeDockerConformance(localTarget({ runtime: 'runsc', name: 'docker runsc' }));
