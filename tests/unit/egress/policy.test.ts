/** The proxy's decisions, as pure functions: names, ports, deny before allow, resolved addresses. */
import { describe, expect, it } from 'vitest';
import {
  addressGuard,
  decideName,
  hostMatches,
  parseHostPattern,
  type EgressPolicy,
} from '../../../src/egress-policy.js';
import { queryName } from '../../../src/sandbox/egress/proxy.js';

const policy: EgressPolicy = {
  allow: [
    { host: 'registry.npmjs.org', ports: [443] },
    { host: '*.corp.example', ports: [443, 80] },
  ],
  deny: [{ host: '*.corp.example', ports: [443, 80], except: ['mirror.corp.example'] }],
  privateRanges: ['10.20.0.0/16'],
  resolvers: [],
};

describe('egress policy', () => {
  it('matches exact names and *.suffix (below the suffix only), case and trailing dot aside', () => {
    expect(hostMatches('*.corp.example', 'a.b.corp.example')).toBe(true);
    expect(hostMatches('*.corp.example', 'corp.example')).toBe(false);
    expect(hostMatches('*.corp.example', 'evilcorp.example')).toBe(false);
    expect(decideName(policy, 'REGISTRY.npmjs.org.', 443)).toMatchObject({ allowed: true });
  });

  it('refuses IP literals, other ports, names not allowed, and what a deny rule covers', () => {
    expect(decideName(policy, '104.16.0.1', 443)).toMatchObject({ allowed: false, rule: 'ip-literal' });
    expect(decideName(policy, '[::1]', 443)).toMatchObject({ allowed: false, rule: 'ip-literal' });
    expect(decideName(policy, 'registry.npmjs.org', 22)).toMatchObject({ allowed: false, rule: 'port' });
    expect(decideName(policy, 'example.org', 443)).toMatchObject({ allowed: false, rule: 'not-allowed' });
    expect(decideName(policy, 'secret.corp.example', 443)).toMatchObject({
      allowed: false,
      rule: 'deny *.corp.example:443,80',
    });
    expect(decideName(policy, 'mirror.corp.example', 443)).toMatchObject({
      allowed: true,
      rule: 'allow *.corp.example:443,80',
    });
    expect(decideName(policy, 'a..b', 443)).toMatchObject({ allowed: false, rule: 'invalid-host' });
  });

  it('refuses private, loopback, link-local, mapped and own addresses unless the range is named', () => {
    const guard = addressGuard(policy, ['10.20.0.1']);
    expect(guard.problem('93.184.216.34')).toBeUndefined();
    expect(guard.problem('10.20.3.4')).toBeUndefined();
    expect(guard.problem('10.20.0.1')).toMatch(/own address/);
    expect(guard.problem('127.0.0.1')).toMatch(/private, loopback/);
    expect(guard.problem('::ffff:127.0.0.1')).toMatch(/private, loopback/);
    expect(guard.problem('169.254.169.254')).toMatch(/private, loopback/);
    expect(guard.problem('192.168.1.1')).toMatch(/private, loopback/);
    expect(guard.problem('::1')).toMatch(/private, loopback/);
    expect(guard.problem('fd00::1')).toMatch(/private, loopback/);
    expect(guard.problem('0.0.0.0')).toMatch(/private, loopback/);
  });

  it('parses patterns and refuses addresses as patterns', () => {
    expect(parseHostPattern('*.Example.com:8443')).toEqual({ host: '*.example.com', port: 8443 });
    expect(parseHostPattern('10.0.0.1')).toMatch(/IP address/);
    expect(parseHostPattern('*')).toMatch(/expected/);
  });

  it("reads a DNS query's name defensively", () => {
    const query = Buffer.concat([
      Buffer.alloc(12),
      Buffer.from([3, 0x61, 0x62, 0x63, 4, 0x74, 0x65, 0x73, 0x74, 0]),
      Buffer.alloc(4),
    ]);
    expect(queryName(query)).toBe('abc.test');
    expect(queryName(Buffer.concat([Buffer.alloc(12), Buffer.from([200, 1, 2])]))).toBeUndefined();
  });
});
