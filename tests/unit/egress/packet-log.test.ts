/** Kernel log lines of the egress packet rules, as log entries (the lines as this kernel writes them). */
import { describe, expect, it } from 'vitest';
import { packetEntry } from '../../../src/sandbox/egress/packet-log.js';

const AT = Date.parse('2026-12-01T12:00:00.000Z');

describe('packet lines past the proxy', () => {
  it('a TCP SYN: destination, port and size, refused with the reason', () => {
    const line =
      'sandbox-harness-egress: IN=shxexp0 OUT= PHYSIN=veth02559f7 MAC=02:42:a2:24:71:e7:02:42:0a:d5:fa:02:08:00 SRC=10.213.250.2 DST=10.232.9.9 LEN=60 TOS=0x00 PREC=0x00 TTL=64 ID=64829 DF PROTO=TCP SPT=35038 DPT=7000 WINDOW=64240 RES=0x00 SYN URGP=0 ';
    expect(packetEntry(line, AT)).toEqual({
      time: '2026-12-01T12:00:00.000Z',
      method: 'TCP',
      host: '10.232.9.9',
      port: 7000,
      allowed: false,
      rule: 'no-proxy',
      reason:
        'a TCP packet to 10.232.9.9:7000 that did not go through the proxy: dropped (the proxy is the only way out)',
      address: '10.232.9.9',
      bytesOut: 60,
      bytesIn: 0,
    });
  });

  it("UDP takes the IP packet's length, not the datagram's; ICMP has no port", () => {
    const udp =
      'sandbox-harness-egress: IN=shxexp0 OUT= SRC=10.213.250.2 DST=10.232.9.9 LEN=29 TOS=0x00 PROTO=UDP SPT=41119 DPT=7001 LEN=9 ';
    expect(packetEntry(udp, AT)).toMatchObject({ method: 'UDP', port: 7001, bytesOut: 29 });
    const icmp =
      'sandbox-harness-egress: IN=shxexp0 OUT= SRC=10.213.250.2 DST=10.232.9.9 LEN=84 PROTO=ICMP TYPE=8 CODE=0 ID=3 SEQ=1 ';
    expect(packetEntry(icmp, AT)).toMatchObject({ method: 'ICMP', port: 0 });
    expect(packetEntry(icmp, AT)!.reason).toMatch(/^a ICMP packet to 10\.232\.9\.9 that/);
    expect(packetEntry('sandbox-harness-egress: IN=shxexp0 garbage', AT)).toBeUndefined();
  });
});
