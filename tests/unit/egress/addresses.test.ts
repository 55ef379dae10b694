/** The proxy's address checks and name comparison, as functions: spellings, ranges never reachable, this host's addresses now. */
import { describe, expect, it } from 'vitest';
import {
  addressesOfIfInet6,
  canonicalAddress,
  hostHas,
  listedHostAddress,
  localRangesOfFibTrie,
  neverReachable,
} from '../../../src/sandbox/egress/addresses.js';
import { comparableName, parseHostHeader } from '../../../src/sandbox/egress/names.js';

const never = (text: string) => neverReachable(canonicalAddress(text)!);

describe('addresses', () => {
  it('spells every form of an IPv4-mapped address as its IPv4 address, and IPv6 compressed', () => {
    for (const form of ['::ffff:127.0.0.1', '::FFFF:7f00:1', '0:0:0:0:0:ffff:7f00:0001', '::ffff:7F00:0001'])
      expect(canonicalAddress(form), form).toEqual({ address: '127.0.0.1', family: 4 });
    expect(canonicalAddress('2001:DB8:0:0:0:0:0:1')).toEqual({ address: '2001:db8::1', family: 6 });
    expect(canonicalAddress('fe80::1%eth0')).toBeUndefined();
    expect(canonicalAddress('010.0.0.1')).toBeUndefined();
    expect(canonicalAddress('example.org')).toBeUndefined();
  });

  it('never reaches loopback, link-local, unspecified, multicast and the forms that carry IPv4', () => {
    expect(never('127.0.0.2')).toMatch(/loopback address \(127\.0\.0\.0\/8\)/);
    expect(never('::1')).toMatch(/loopback/);
    expect(never('::ffff:127.0.0.1')).toMatch(/loopback/);
    expect(never('::127.0.0.1')).toMatch(/IPv4-compatible/);
    expect(never('0.0.0.0')).toMatch(/unspecified/);
    expect(never('::')).toMatch(/unspecified/);
    expect(never('169.254.169.254')).toMatch(/link-local/);
    expect(never('fe80::1')).toMatch(/link-local/);
    expect(never('fec0::1')).toMatch(/site-local/);
    expect(never('224.0.0.251')).toMatch(/multicast/);
    expect(never('ff02::1')).toMatch(/multicast/);
    expect(never('255.255.255.255')).toMatch(/broadcast/);
    expect(never('2002:7f00:1::1')).toMatch(/6to4/);
    expect(never('2001:0:4136:e378::1')).toMatch(/Teredo/);
    // Private ranges are the catalog's to name (privateRanges), not refused here.
    expect(never('10.1.2.3')).toBeUndefined();
    expect(never('fd00::1')).toBeUndefined();
    expect(never('93.184.216.34')).toBeUndefined();
  });

  it('reads local ranges from the kernel routing tables and IPv6 addresses from its interface list', () => {
    const trie = [
      'Main:',
      '  +-- 0.0.0.0/0 3 0 4',
      '     |-- 0.0.0.0',
      '        /0 universe UNICAST',
      '     +-- 172.17.0.0/16 2 0 2',
      '        |-- 172.17.0.0',
      '           /16 link UNICAST',
      '        |-- 172.17.0.1',
      '           /32 host LOCAL',
      '     |-- 10.5.0.0',
      '        /16 host LOCAL',
      '        /24 link UNICAST',
    ].join('\n');
    expect(localRangesOfFibTrie(trie)).toEqual([
      ['172.17.0.1', 32],
      ['10.5.0.0', 16],
    ]);
    const inet6 = [
      'fe8000000000000000fc00fffe000001 04 40 20 80     eth0',
      '00000000000000000000000000000001 01 80 10 80       lo',
      'garbage',
    ].join('\n');
    expect(addressesOfIfInet6(inet6)).toEqual(['fe80::fc:ff:fe00:1', '::1']);
  });

  it("knows this host's addresses at the moment it is asked: the kernel's answer, or its lists", async () => {
    expect(await hostHas({ address: '127.0.0.1', family: 4 })).toMatch(/this host/);
    expect(listedHostAddress({ address: '127.0.0.1', family: 4 })).toMatch(/this host/);
    // TEST-NET-3: no host has it.
    expect(await hostHas({ address: '203.0.113.77', family: 4 })).toBeUndefined();
    expect(listedHostAddress({ address: '203.0.113.77', family: 4 })).toBeUndefined();
    expect(listedHostAddress({ address: '2001:db8::77', family: 6 })).toBeUndefined();
  });
});

describe('names', () => {
  it('compares names case-insensitively, without a trailing dot, IDNA as A-labels', () => {
    expect(comparableName('Allowed.Fake.Test.')).toBe('allowed.fake.test');
    expect(comparableName('bücher.example')).toBe('xn--bcher-kva.example');
    expect(comparableName('xn--bcher-kva.example')).toBe('xn--bcher-kva.example');
    expect(comparableName('a b.example')).toBeUndefined();
    expect(comparableName('')).toBeUndefined();
  });

  it('reads a Host header as a name and an optional port, nothing else', () => {
    expect(parseHostHeader('allowed.fake.test')).toEqual({ name: 'allowed.fake.test' });
    expect(parseHostHeader('ALLOWED.fake.test.:80')).toEqual({ name: 'allowed.fake.test', port: 80 });
    for (const bad of [
      'a@b.example',
      'a.example:0',
      'a.example:99999',
      'a.example/x',
      '[::1]',
      'a.example:80:80',
      '',
    ])
      expect(parseHostHeader(bad), bad).toBeUndefined();
  });
});
