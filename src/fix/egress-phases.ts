/**
 * Which sandbox of a run gets egress, and with what policy: the agent's by default, the
 * baseline's and the verification's only when the catalog lists their phase (a verdict that
 * depends on the network is not a verdict about the change). Review sandboxes never do.
 */
import type { EgressConfig } from '../catalog/schema.js';
import { DEFAULT_PORTS, parseHostPattern, type EgressPolicy, type HostRule } from '../egress-policy.js';

export type EgressPhase = EgressConfig['phases'][number];

/** The phase a sandbox role belongs to (`attempt-2` -> agent, `verify-2-visible` -> verify). */
export function phaseOfRole(role: string): EgressPhase | undefined {
  if (/^attempt-\d+$/.test(role)) return 'agent';
  if (role === 'baseline') return 'baseline';
  if (/^verify-\d+(-visible)?$/.test(role)) return 'verify';
  return undefined;
}

function rule(entry: EgressConfig['allow'][number]): HostRule {
  const text = typeof entry === 'string' ? entry : entry.host;
  const parsed = parseHostPattern(text);
  // The schema has checked every pattern; this cannot be a string here.
  if (typeof parsed === 'string') throw new Error(parsed);
  const ports =
    typeof entry !== 'string' && entry.ports
      ? entry.ports
      : parsed.port !== undefined
        ? [parsed.port]
        : DEFAULT_PORTS;
  return {
    host: parsed.host,
    ports,
    ...(typeof entry !== 'string' && entry.except ? { except: entry.except.map((e) => rule(e).host) } : {}),
  };
}

export function egressPolicy(config: EgressConfig): EgressPolicy {
  return {
    allow: config.allow.map(rule),
    deny: config.deny.map(rule),
    privateRanges: config.privateRanges,
    resolvers: config.resolvers,
  };
}

/** The policy for the sandbox of `role`, or undefined (network none). */
export function egressForRole(config: EgressConfig | undefined, role: string): EgressPolicy | undefined {
  const phase = phaseOfRole(role);
  return phase ? egressForPhase(config, phase) : undefined;
}

/** The policy of a sandbox of `phase` (`exec --catalog` is the agent's), or undefined (network none). */
export function egressForPhase(
  config: EgressConfig | undefined,
  phase: EgressPhase,
): EgressPolicy | undefined {
  return config?.phases.includes(phase) ? egressPolicy(config) : undefined;
}

/** The policy of the image build's steps (phase `build`), or undefined (network none, or build.network). */
export function buildEgress(config: EgressConfig | undefined): EgressPolicy | undefined {
  return config?.phases.includes('build') ? egressPolicy(config) : undefined;
}

/** The spec fields for `role`: `{ egress }` or nothing. */
export function egressSpec(config: EgressConfig | undefined, role: string): { egress?: EgressPolicy } {
  const egress = egressForRole(config, role);
  return egress ? { egress } : {};
}
