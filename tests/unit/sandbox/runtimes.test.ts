/**
 * Registering gVisor in an engine's daemon.json keeps everything the file already says, does
 * nothing when the entry is there, and never overwrites a file it cannot read as an object.
 */
import { describe, expect, it } from 'vitest';
import { mergeDaemonRuntime, RUNSC_ENTRY } from '../../../src/sandbox/docker/operator/gvisor-setup.js';
import { validRuntimeName } from '../../../src/sandbox/docker/runtimes.js';
import { sandboxSchema } from '../../../src/catalog/sandbox-schema.js';

describe('daemon.json runtime registration', () => {
  it('adds runsc with --network=none to a missing or empty file', () => {
    for (const text of [undefined, '', '  \n']) {
      const merged = mergeDaemonRuntime(text, 'runsc', RUNSC_ENTRY);
      expect(merged.changed).toBe(true);
      expect(JSON.parse(merged.text)).toEqual({
        runtimes: { runsc: { path: '/usr/bin/runsc', runtimeArgs: ['--network=none'] } },
      });
    }
  });

  it('keeps every other setting and runtime the file has', () => {
    const before = JSON.stringify({
      'storage-driver': 'overlay2',
      'log-level': 'warn',
      runtimes: { kata: { path: '/usr/bin/kata-runtime' } },
    });
    const merged = JSON.parse(mergeDaemonRuntime(before, 'runsc', RUNSC_ENTRY).text) as Record<
      string,
      unknown
    >;
    expect(merged).toEqual({
      'storage-driver': 'overlay2',
      'log-level': 'warn',
      runtimes: { kata: { path: '/usr/bin/kata-runtime' }, runsc: RUNSC_ENTRY },
    });
  });

  it('changes nothing when runsc is already registered that way (idempotent)', () => {
    const once = mergeDaemonRuntime('{"debug":true}', 'runsc', RUNSC_ENTRY).text;
    const twice = mergeDaemonRuntime(once, 'runsc', RUNSC_ENTRY);
    expect(twice).toEqual({ text: once, changed: false });
  });

  it('fixes an entry without --network=none (a network-none sandbox would not start)', () => {
    const merged = mergeDaemonRuntime(
      '{"runtimes":{"runsc":{"path":"/usr/bin/runsc"}}}',
      'runsc',
      RUNSC_ENTRY,
    );
    expect(merged.changed).toBe(true);
    expect(JSON.parse(merged.text)).toEqual({ runtimes: { runsc: RUNSC_ENTRY } });
  });

  it('refuses a file that is not a JSON object rather than overwriting it', () => {
    for (const text of ['{not json', '[1,2]', '"x"', '{"runtimes":[]}']) {
      expect(() => mergeDaemonRuntime(text, 'runsc', RUNSC_ENTRY)).toThrow(/not changed/);
    }
  });
});

describe('sandbox.runtime in the catalog', () => {
  it('takes a runtime name and leaves it absent by default (the engine decides)', () => {
    expect(sandboxSchema.parse({ runtime: 'runsc' }).runtime).toBe('runsc');
    expect(sandboxSchema.parse({}).runtime).toBeUndefined();
  });

  it('refuses what is not a runtime name, saying what is expected', () => {
    for (const bad of ['', 'run sc', '--privileged', 'a/b', 7]) {
      const parsed = sandboxSchema.safeParse({ runtime: bad });
      expect(parsed.success).toBe(false);
      expect(parsed.error?.issues[0]?.message).toMatch(/runtime name the engine lists/);
    }
    expect(validRuntimeName('io.containerd.runc.v2')).toBe(true);
    expect(validRuntimeName('-x')).toBe(false);
  });
});
