import { describe, expect, it } from 'vitest';
import {
  hostKeyAccepted,
  knownHostsName,
  parseKnownHosts,
} from '../../../src/sandbox/docker/engine/known-hosts.js';

// Made with ssh-keygen: two ed25519 keys, then `ssh-keygen -H` for the hashed forms.
const KEY_RUNNER = 'AAAAC3NzaC1lZDI1NTE5AAAAIJZKOkoU4T0kFRbMTuXxLXbM4dnpYHsgCHMHnL9kOc67';
const KEY_PORT = 'AAAAC3NzaC1lZDI1NTE5AAAAIArR/zbecZFPN6TiWDiTLLbN52vTXJiHQ/EhErPLDzEo';
const HASHED = [
  `|1|iD7aE01cXDJDdxXnnc9laA7D3tU=|swbNKjMvnKi9f1pdxsnF6Sfp/k0= ssh-ed25519 ${KEY_RUNNER}`,
  `|1|WyS5A4mbLrq9fcG1yffsYag9yX4=|hk0mijAcPHtB4UX252WtpgEIxFY= ssh-ed25519 ${KEY_PORT}`,
].join('\n');
const blob = (b64: string) => Buffer.from(b64, 'base64');

describe('known_hosts decides which ssh engines are who they claim to be', () => {
  it('names a host as ssh does: bare on port 22, [host]:port otherwise', () => {
    expect(knownHostsName('Runner-3', 22)).toBe('runner-3');
    expect(knownHostsName('10.0.0.5', 2222)).toBe('[10.0.0.5]:2222');
  });

  it('finds plain entries by name, in comma lists and by wildcard, and respects negation', () => {
    const text = [
      '# comment',
      `runner-3,10.0.0.9 ssh-ed25519 ${KEY_RUNNER} user@box`,
      `*.example.com,!bad.example.com ssh-ed25519 ${KEY_PORT}`,
      `[10.0.0.5]:2222 ssh-ed25519 ${KEY_PORT}`,
    ].join('\n');
    expect(parseKnownHosts(text, 'runner-3', 22).map((k) => k.source)).toEqual(['known_hosts:2']);
    expect(parseKnownHosts(text, '10.0.0.9', 22)).toHaveLength(1);
    expect(parseKnownHosts(text, 'ci.example.com', 22)).toHaveLength(1);
    expect(parseKnownHosts(text, 'bad.example.com', 22)).toHaveLength(0);
    expect(parseKnownHosts(text, '10.0.0.5', 2222)).toHaveLength(1);
    // The same address on another port is another host to ssh.
    expect(parseKnownHosts(text, '10.0.0.5', 22)).toHaveLength(0);
  });

  it('finds hashed entries written by ssh-keygen -H', () => {
    const runner = parseKnownHosts(HASHED, 'runner-3.example.com', 22);
    expect(runner.map((k) => k.key)).toEqual([blob(KEY_RUNNER)]);
    const port = parseKnownHosts(HASHED, '10.0.0.5', 2222);
    expect(port.map((k) => k.key)).toEqual([blob(KEY_PORT)]);
    expect(parseKnownHosts(HASHED, 'runner-4.example.com', 22)).toEqual([]);
  });

  it('accepts only the listed key, and never a revoked one', () => {
    const keys = parseKnownHosts(`runner-3 ssh-ed25519 ${KEY_RUNNER}`, 'runner-3', 22);
    expect(hostKeyAccepted(keys, blob(KEY_RUNNER))).toBe(true);
    expect(hostKeyAccepted(keys, blob(KEY_PORT))).toBe(false);
    expect(hostKeyAccepted([], blob(KEY_RUNNER))).toBe(false);
    const revoked = parseKnownHosts(
      `runner-3 ssh-ed25519 ${KEY_RUNNER}\n@revoked runner-3 ssh-ed25519 ${KEY_RUNNER}`,
      'runner-3',
      22,
    );
    expect(hostKeyAccepted(revoked, blob(KEY_RUNNER))).toBe(false);
  });

  it('ignores @cert-authority lines (host certificates are not supported) and broken lines', () => {
    const text = [
      `@cert-authority runner-3 ssh-ed25519 ${KEY_RUNNER}`,
      'runner-3 ssh-ed25519',
      'garbage',
    ].join('\n');
    expect(parseKnownHosts(text, 'runner-3', 22)).toEqual([]);
  });
});
