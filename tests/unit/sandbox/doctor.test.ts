/**
 * `doctor` refuses a Docker engine older than API 1.41 (Docker 20.10) and says why.
 */
import { describe, expect, it } from 'vitest';
import {
  apiAtLeast,
  MIN_API,
  serverVersionCheck,
} from '../../../src/sandbox/docker/operator/engine-doctor.js';
import type { EngineInfo } from '../../../src/sandbox/docker/engine/index.js';

const info = (serverVersion: string, apiVersion: string): EngineInfo => ({
  serverVersion,
  apiVersion,
  storageDriver: 'overlay2',
  cgroupVersion: '1',
  operatingSystem: 'Debian GNU/Linux 12',
  initBinary: 'docker-init',
  dockerRootDir: '/var/lib/docker',
  cpus: 2,
  memoryBytes: 24 * 1024 ** 3,
  name: 'host',
  id: 'engine-id',
  memoryLimit: true,
  swapLimit: true,
  pidsLimit: true,
  runtimes: ['runc'],
  defaultRuntime: 'runc',
  runtimePaths: { runc: 'runc' },
  securityOptions: ['name=seccomp,profile=default'],
  product: 'docker',
});

describe('engine API version', () => {
  it('compares major.minor numerically, not as text', () => {
    expect(MIN_API).toEqual([1, 41]);
    expect(apiAtLeast('1.41', MIN_API)).toBe(true);
    expect(apiAtLeast('1.50', MIN_API)).toBe(true);
    expect(apiAtLeast('2.0', MIN_API)).toBe(true);
    expect(apiAtLeast('1.40', MIN_API)).toBe(false);
    expect(apiAtLeast('1.9', MIN_API)).toBe(false);
    expect(apiAtLeast('0.99', MIN_API)).toBe(false);
    expect(apiAtLeast('', MIN_API)).toBe(false);
    expect(apiAtLeast('1.41-beta', MIN_API)).toBe(false);
  });

  it('accepts Docker 20.10 (API 1.41) and newer', () => {
    expect(serverVersionCheck(info('20.10.24', '1.41'))).toEqual({
      name: 'server-version',
      ok: true,
      detail: 'Docker 20.10.24 (API 1.41) on Debian GNU/Linux 12',
    });
    expect(serverVersionCheck(info('28.1.1', '1.49')).ok).toBe(true);
  });

  it('refuses Docker 19.03 (API 1.40) as fatal, saying what is needed, why, and how to upgrade', () => {
    const check = serverVersionCheck(info('19.03.15', '1.40'));
    expect(check).toMatchObject({ name: 'server-version', ok: false, fatal: true });
    expect(check.detail).toBe(
      'Docker 19.03.15 (API 1.40) on Debian GNU/Linux 12: older than Docker 20.10 (API 1.41), which sandbox-harness needs',
    );
    expect(check.fix).toMatch(
      /^Upgrade the Docker engine to 20\.10 or newer \(Debian: `apt-get install -y docker\.io`\)\. Why: /,
    );
    expect(check.fix).toMatch(
      /ignores settings it does not know .* a sandbox limit could silently not apply/,
    );
  });

  it('refuses an engine that does not say its API version', () => {
    const check = serverVersionCheck(info('', ''));
    expect(check).toMatchObject({ ok: false, fatal: true });
    expect(check.detail).toMatch(/did not say its API version, and sandbox-harness needs 1\.41 or newer/);
  });
});
