/**
 * `doctor`'s look at a sandbox's resolver files: the harness's own pass; an engine that wrote
 * its own over them (Podman's hosts file from the host's /etc/hosts) is named, with the fix.
 */
import { describe, expect, it } from 'vitest';
import { hostsFile, resolvConf } from '../../../src/sandbox/container/loopback-names.js';
import { namesCheck, splitNamesProbe } from '../../../src/sandbox/docker/operator/names-check.js';
import { parseDf } from '../../../src/sandbox/docker/operator/engine-doctor.js';

const DF = 'Filesystem 1024-blocks Used Available Capacity Mounted on\noverlay 100 40 60 40% /\n';

describe('the probe output', () => {
  it('splits into what came before (df) and the two files', () => {
    const seen = splitNamesProbe(`${DF}@@hosts\n${hostsFile()}@@resolv\n${resolvConf()}`);
    expect(seen).toEqual({ before: DF, hosts: hostsFile(), resolv: resolvConf() });
    expect(parseDf(seen.before)).toEqual({ freeBytes: 60 * 1024, totalBytes: 100 * 1024 });
  });

  it('without the markers, is all before', () => {
    expect(splitNamesProbe(DF)).toEqual({ before: DF });
  });
});

describe('namesCheck', () => {
  it("passes when both files are the harness's", () => {
    expect(namesCheck({ hosts: hostsFile(), resolv: resolvConf() }, 'Docker')).toMatchObject({
      name: 'sandbox-names',
      ok: true,
    });
  });

  it("fails naming the host's entries that Podman put into the hosts file, with Podman's fix", () => {
    // What rootful Podman 4.3 gave a sandbox here: the harness's lines, then the host's.
    const podman = [
      '::1\tlocalhost',
      '::1\tip6-localhost',
      '::1\tip6-loopback',
      '127.0.0.1\tsandbox',
      '::1\tsandbox',
      '127.0.0.1\tlocalhost',
      '127.0.0.1\trunsc',
      '127.0.0.1\tvm',
      '192.0.2.2\thost.containers.internal',
      '127.0.0.1\tsandbox-harness-run-attempt-1-5e2f99',
      '',
    ].join('\n');
    const check = namesCheck({ hosts: podman, resolv: resolvConf() }, 'Podman');
    expect(check.ok).toBe(false);
    expect(check.fatal).toBeUndefined();
    // The host's own entries; not the container's name nor the engine's name for the host.
    expect(check.detail).toContain('2 entries');
    expect(check.detail).toContain('127.0.0.1 runsc; 127.0.0.1 vm');
    expect(check.detail).not.toContain('host.containers.internal');
    expect(check.fix).toContain('base_hosts_file = "image"');
  });

  it('passes what Podman writes with base_hosts_file = "image": the container\'s name, its name for the host', () => {
    // Podman 4.3 here: the harness's entries one name per line, then the file itself again.
    const image = `::1\tlocalhost\n::1\tip6-localhost\n127.0.0.1\tsandbox\n${hostsFile()}192.0.2.2\thost.containers.internal\n127.0.0.1\tsandbox-harness-doctor-1a2b3c4d\n`;
    expect(namesCheck({ hosts: image, resolv: resolvConf() }, 'Podman').ok).toBe(true);
  });

  it("fails on a name server that is not the sandbox's own loopback", () => {
    const check = namesCheck(
      { hosts: hostsFile(), resolv: 'nameserver 10.0.0.2\nsearch corp.example\n' },
      'Docker',
    );
    expect(check.ok).toBe(false);
    expect(check.detail).toContain('nameserver 10.0.0.2');
    expect(check.fix).not.toContain('Podman');
  });

  it('is a warning, not a pass, when the files were not printed', () => {
    expect(namesCheck({}, 'Docker')).toMatchObject({ ok: true, warning: true });
  });
});
