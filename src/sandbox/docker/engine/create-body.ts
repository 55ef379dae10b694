/**
 * The neutral container spec in the Docker API's words: the body of `POST /containers/create`.
 * The only file in src/ that writes HostConfig fields (tests/unit/structure.test.ts); each
 * field comes from the spec, so what a sandbox is stays written once, in
 * `sandbox/container/container-spec.ts`.
 */
import type Docker from 'dockerode';
import type { ContainerSpec } from '../../container/container-spec.js';

export function createBody(spec: ContainerSpec): Docker.ContainerCreateOptions {
  const { hardening, network } = spec;
  return {
    // Always a key, even without a name: the client also repeats the body as the query.
    name: spec.name,
    Hostname: spec.hostname,
    Image: spec.image,
    Entrypoint: [...spec.entrypoint],
    Cmd: spec.cmd,
    User: spec.user,
    WorkingDir: spec.workingDir,
    Env: spec.env,
    Labels: spec.labels,
    // No network stack at all (a fresh namespace with lo only) unless the sandbox has
    // egress; the engine then writes no hosts file or resolver settings, so the engine
    // client places them (see loopback-names.ts).
    NetworkDisabled: network.mode === 'none',
    AttachStdin: false,
    AttachStdout: false,
    AttachStderr: false,
    Tty: false,
    Healthcheck: { Test: hardening.healthcheck === 'none' ? ['NONE'] : [] },
    HostConfig: {
      NetworkMode: network.mode === 'none' ? 'none' : network.name,
      ...(network.mode === 'named'
        ? {
            Dns: network.resolver.nameServers,
            DnsSearch: network.resolver.search,
            DnsOptions: network.resolver.options,
          }
        : {}),
      ExtraHosts: spec.extraHosts,
      CapDrop: [...hardening.capDrop],
      SecurityOpt: hardening.noNewPrivileges ? ['no-new-privileges'] : [],
      Privileged: hardening.privileged,
      Init: hardening.init,
      IpcMode: hardening.ipc,
      PidsLimit: spec.pids,
      Memory: spec.memoryBytes,
      MemorySwap: hardening.noSwap ? spec.memoryBytes : -1,
      NanoCpus: spec.nanoCpus,
      Tmpfs: Object.fromEntries(
        spec.tmpfs.map((t) => [
          t.path,
          [...t.flags, `size=${t.sizeBytes}`, `mode=${t.mode.toString(8)}`].join(','),
        ]),
      ),
      Ulimits: [
        { Name: 'nofile', Soft: spec.ulimits.nofile, Hard: spec.ulimits.nofile },
        { Name: 'fsize', Soft: spec.ulimits.fsize, Hard: spec.ulimits.fsize },
        { Name: 'nproc', Soft: spec.ulimits.nproc, Hard: spec.ulimits.nproc },
      ],
      Binds: hardening.mounts === 'none' ? [] : undefined,
      Mounts: hardening.mounts === 'none' ? [] : undefined,
      PublishAllPorts: hardening.publishPorts,
      AutoRemove: hardening.autoRemove,
      RestartPolicy: { Name: hardening.restart },
      LogConfig: { Type: hardening.logDriver, Config: {} },
      ...(spec.diskBytes ? { StorageOpt: { size: String(spec.diskBytes) } } : {}),
      ...(spec.runtime ? { Runtime: spec.runtime } : {}),
    },
  };
}
