import { describe, expect, it } from 'vitest';
import {
  doctorCommand,
  formatFleetDoctor,
  type FleetDoctorResult,
} from '../../../src/cli/commands/doctor.js';
import type { CliContext } from '../../../src/cli/cli-context.js';
import { UsageError } from '../../../src/errors.js';
import { parseDf } from '../../../src/sandbox/docker/operator/engine-doctor.js';

describe('free disk of an engine, read from df inside a container', () => {
  it('takes total and available 1K blocks from the last line of df -Pk', () => {
    const output = [
      'Filesystem     1024-blocks     Used Available Capacity Mounted on',
      'overlay          264212084 26674868  79716044      26% /',
    ].join('\n');
    expect(parseDf(output)).toEqual({ freeBytes: 79716044 * 1024, totalBytes: 264212084 * 1024 });
  });

  it('gives nothing for output it cannot read (a container may print anything)', () => {
    expect(parseDf('')).toBeUndefined();
    expect(parseDf('df: not found')).toBeUndefined();
    expect(parseDf('overlay lots used free 1% /')).toBeUndefined();
  });
});

const check = (name: string, ok: boolean, detail: string, fix?: string) => ({
  name,
  ok,
  detail,
  ...(fix ? { fix } : {}),
});

describe('doctor --engines, as a person reads it', () => {
  it('shows each engine with where it came from, its capacity, what --prepare did, and which engines are broken', () => {
    const result: FleetDoctorResult = {
      ok: false,
      usable: false,
      exitCode: 3,
      engines: [
        {
          name: 'gpu-1',
          origin: 'engines.yaml:5:5',
          endpoint: 'tcp://10.0.0.5:2376 (TLS)',
          capacity: 4,
          capacityFrom: 'cpus',
          prepared: { how: 'shipped', durationMs: 12_345, bytes: 510_000_000 },
          ok: true,
          usable: true,
          checks: [check('daemon', true, 'answers at tcp://10.0.0.5:2376 (TLS)')],
          engine: {
            name: 'gpu-1',
            serverVersion: '20.10.24',
            apiVersion: '1.41',
            cpus: 4,
            memoryBytes: 16e9,
            dockerRootDir: '/var/lib/docker',
          },
        },
        {
          name: 'runner-3',
          origin: '--engine ssh://ci@runner-3',
          endpoint: 'ssh://ci@runner-3:22',
          capacity: null,
          capacityFrom: 'cpus',
          ok: false,
          usable: false,
          checks: [check('daemon', false, 'no answer at ssh://ci@runner-3:22', 'Check that the engine runs')],
        },
      ],
    };
    expect(formatFleetDoctor(result).split('\n')).toEqual([
      'gpu-1: tcp://10.0.0.5:2376 (TLS)  (engines.yaml:5:5)',
      '  4 CPUs, 14.9 GiB memory, capacity 4 trials at once (4 CPUs / 1 per trial)',
      '  ✓ prepare: base image shipped (486 MiB) in 12.3s',
      '  ✓ daemon  answers at tcp://10.0.0.5:2376 (TLS)',
      '',
      'runner-3: ssh://ci@runner-3:22  (--engine ssh://ci@runner-3)',
      '  ✗ daemon  no answer at ssh://ci@runner-3:22',
      '            fix: Check that the engine runs',
      '',
      'cannot run sandboxes: runner-3',
    ]);
  });

  it('refuses --prepare without engines to prepare', async () => {
    const ctx = { cwd: process.cwd(), env: {} } as unknown as CliContext;
    await expect(doctorCommand(ctx, { prepare: true })).rejects.toBeInstanceOf(UsageError);
  });
});
