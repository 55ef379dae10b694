/**
 * The catalog's `sandbox.egress`: which host names a sandbox (or the image build) may reach
 * through its proxy, on which ports, which private ranges an allowed name may resolve to, and
 * in which phases. Host patterns are checked by the egress policy's own parser, so the
 * catalog accepts exactly what the proxy applies.
 */
import { isIP } from 'node:net';
import { z } from 'zod';
import { parseHostPattern } from '../egress-policy.js';
import { int, typeError } from './field-checks.js';
/** Where a sandbox (or the image build) may have egress; everything else runs with network none. */
export const EGRESS_PHASES = ['agent', 'baseline', 'verify', 'build'] as const;

const hostPatternSchema = z
  .string({
    error: 'expected a host name such as "registry.npmjs.org", "*.example.com" or "mirror.corp:8443"',
  })
  .superRefine((value, ctx) => {
    const parsed = parseHostPattern(value);
    if (typeof parsed === 'string')
      ctx.addIssue({ code: 'custom', message: `${JSON.stringify(value)}: ${parsed}` });
  });

const portsSchema = z
  .array(int(1, 65535), { error: 'expected a list of port numbers such as [443, 80]' })
  .min(1, { error: 'expected at least one port' });

const egressRuleSchema = z.union(
  [
    hostPatternSchema,
    z.strictObject({
      host: hostPatternSchema,
      ports: portsSchema.optional(),
      except: z.array(hostPatternSchema, { error: 'expected a list of host patterns' }).optional().meta({
        description: 'Names this rule does not cover (for a deny rule: names it lets through to allow).',
      }),
    }),
  ],
  { error: 'expected a host pattern or {host, ports, except}' },
);

const cidrSchema = z
  .string({ error: 'expected an address range such as "10.20.0.0/16"' })
  .superRefine((value, ctx) => {
    const [address, bits, extra] = value.split('/');
    const family = isIP(address ?? '');
    const max = family === 6 ? 128 : 32;
    const prefix = Number(bits);
    if (
      family === 0 ||
      extra !== undefined ||
      bits === undefined ||
      !Number.isInteger(prefix) ||
      prefix < 0 ||
      prefix > max
    ) {
      ctx.addIssue({
        code: 'custom',
        message: `${JSON.stringify(value)}: expected an address range such as "10.20.0.0/16"`,
      });
    }
  });

const resolverSchema = z
  .string({ error: 'expected a name server address such as "10.0.0.53"' })
  .superRefine((value, ctx) => {
    const address = value.replace(/^\[(.*)\](:\d+)?$/, '$1').replace(/^(\d+\.\d+\.\d+\.\d+):\d+$/, '$1');
    if (isIP(address) === 0)
      ctx.addIssue({
        code: 'custom',
        message: `${JSON.stringify(value)}: expected an IP address, optionally with :port`,
      });
  });

export const egressSchema = z
  .strictObject(
    {
      allow: z.array(egressRuleSchema, { error: 'expected a list of host patterns' }).default([]).meta({
        description:
          'Hosts the sandbox may reach through its proxy: exact names or "*.suffix" (names below suffix), ports 443 and 80 unless ":port" or ports: names others. IP addresses are never allowed by themselves.',
      }),
      deny: z.array(egressRuleSchema, { error: 'expected a list of host patterns' }).default([]).meta({
        description:
          'Checked before allow and wins over it; a rule\'s except: lists names it does not cover (deny "*.corp.example" except "mirror.corp.example").',
      }),
      privateRanges: z.array(cidrSchema, { error: 'expected a list of address ranges' }).default([]).meta({
        description:
          "Private ranges an allowed name may resolve to (an internal mirror on 10.x). Without them such answers are refused (DNS rebinding). Loopback, link-local, unspecified and multicast addresses, and the engine host's own addresses (as they are at each connect), are refused always, whatever this names.",
      }),
      resolvers: z
        .array(resolverSchema, { error: 'expected a list of name server addresses' })
        .default([])
        .meta({
          description:
            "Name servers the proxy asks (default: the host's). The sandbox itself never gets one.",
        }),
      phases: z
        .array(z.enum(EGRESS_PHASES, { error: 'expected "agent", "baseline", "verify" or "build"' }), {
          error: 'expected a list of phases such as ["agent"]',
        })
        .default(['agent'])
        .meta({
          description:
            "Which sandboxes get egress: the agent's by default; the baseline's and the verification's only when listed (a verdict should not depend on the network). \"build\": the image build's steps reach the same names through a proxy of their own (instead of sandbox.build.network's whole network).",
        }),
    },
    { error: typeError('expected {allow: [hosts], deny: [hosts], privateRanges, resolvers, phases}') },
  )
  .meta({
    description:
      'Egress by host name through a proxy outside the sandbox, with every request logged. Absent: network none. Refused where the engine cannot enforce it (see `sandbox-harness doctor`).',
  });
