/**
 * How the daemon's refusals of an exec are read: a sandbox that stopped is `SandboxDead` (the
 * harness then asks why, and a gVisor sandbox ended by a fork bomb is reported as such), never
 * the engine being unavailable.
 */
import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { EngineExec } from '../../../src/sandbox/docker/engine/index.js';

function engineWhoseExec(fails: { at: 'create' | 'start'; statusCode: number; reason: string }): EngineExec {
  const error = Object.assign(new Error(`(HTTP code ${fails.statusCode}) ${fails.reason}`), {
    statusCode: fails.statusCode,
    reason: fails.reason,
    json: { message: fails.reason },
  });
  const docker = {
    getContainer: () => ({
      exec: async () => {
        if (fails.at === 'create') throw error;
        return {
          start: async () => {
            throw error;
          },
        };
      },
    }),
  };
  return new EngineExec(docker as unknown as ConstructorParameters<typeof EngineExec>[0], undefined);
}

const options = {
  cmd: ['true'],
  user: '1000',
  workingDir: '/',
  env: [],
  stdout: new PassThrough(),
  stderr: new PassThrough(),
};

describe('EngineExec.start refusals', () => {
  it('an exec started on a sandbox that stopped after its creation (500 "container not running") is SandboxDead', async () => {
    const engine = engineWhoseExec({
      at: 'start',
      statusCode: 500,
      reason: 'container not running - Container 5a83 is not running: Exited (2) Less than a second ago',
    });
    await expect(engine.start('5a83124bcfda', options)).rejects.toMatchObject({ code: 'SANDBOX_DEAD' });
  });

  it('an exec made on a stopped sandbox (409) is SandboxDead', async () => {
    const engine = engineWhoseExec({
      at: 'create',
      statusCode: 409,
      reason: 'Container 5a83 is not running',
    });
    await expect(engine.start('5a83124bcfda', options)).rejects.toMatchObject({ code: 'SANDBOX_DEAD' });
  });

  it('another daemon error is not mistaken for a dead sandbox', async () => {
    const engine = engineWhoseExec({
      at: 'start',
      statusCode: 500,
      reason: 'OCI runtime exec failed: no space left',
    });
    await expect(engine.start('5a83124bcfda', options)).rejects.not.toMatchObject({
      code: 'SANDBOX_DEAD',
    });
  });
});
