/** An engine's networks: the internal bridges egress sandboxes join, made, listed and removed. */
import type Docker from 'dockerode';
import { parseObjectName } from '../../../object-names.js';
import { networkInPath } from './api-paths.js';
import { labelFilter } from './connection.js';
import { daemonMessage, NetworkConflict, statusOf, translateDaemonError } from './daemon-errors.js';

export interface NetworkCreateOptions {
  name: string;
  labels: Record<string, string>;
  subnet: string;
  gateway: string;
  /** The host-side bridge interface's name (the firewall matches it). */
  bridgeName: string;
}

export interface NetworkSummary {
  id: string;
  name: string;
  labels: Record<string, string>;
  createdAt: Date;
  /** Containers attached now. */
  containers: number;
  bridgeName: string;
}

export class EngineNetworks {
  constructor(
    private readonly docker: Docker,
    private readonly where: string | undefined,
  ) {}

  /** An `internal` bridge network (no route out) with an explicit subnet, so no address pool is used. */
  async create(options: NetworkCreateOptions): Promise<string> {
    parseObjectName(options.name, 'network name');
    try {
      const network = await this.docker.createNetwork({
        Name: options.name,
        Driver: 'bridge',
        Internal: true,
        CheckDuplicate: true,
        EnableIPv6: false,
        Attachable: false,
        Labels: options.labels,
        IPAM: { Driver: 'default', Config: [{ Subnet: options.subnet, Gateway: options.gateway }] },
        Options: {
          'com.docker.network.bridge.name': options.bridgeName,
          'com.docker.network.bridge.enable_ip_masquerade': 'false',
          'com.docker.network.bridge.enable_icc': 'true',
        },
      });
      return network.id;
    } catch (error) {
      if (/overlap|in use|already exists/i.test(daemonMessage(error))) {
        throw new NetworkConflict(daemonMessage(error));
      }
      throw translateDaemonError(error, `creating network ${options.name}`, this.where);
    }
  }

  async remove(id: string): Promise<void> {
    const network = this.docker.getNetwork(networkInPath(id));
    try {
      await network.remove();
    } catch (error) {
      if (statusOf(error) === 404) return;
      throw translateDaemonError(error, `removing network ${id.slice(0, 12)}`, this.where);
    }
  }

  async list(labels: Record<string, string | true>): Promise<NetworkSummary[]> {
    try {
      const list = (await this.docker.listNetworks({ filters: { label: labelFilter(labels) } })) as Array<{
        Id: string;
        Name: string;
        Labels?: Record<string, string>;
        Created?: string;
        Containers?: Record<string, unknown>;
        Options?: Record<string, string>;
      }>;
      return list.map((n) => ({
        id: n.Id,
        name: n.Name,
        labels: n.Labels ?? {},
        createdAt: new Date(n.Created ?? 0),
        containers: Object.keys(n.Containers ?? {}).length,
        bridgeName: n.Options?.['com.docker.network.bridge.name'] ?? '',
      }));
    } catch (error) {
      throw translateDaemonError(error, 'listing networks', this.where);
    }
  }
}
