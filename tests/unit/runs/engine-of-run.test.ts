/**
 * Which engine `inspect`, `shell` and `rerun-tests` go to for a run's kept containers: the
 * one its record names, found by the engines the user names or by the record's reference.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { PassThrough } from 'node:stream';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { backendOfRun } from '../../../src/cli/run-lookup.js';
import type { CliContext } from '../../../src/cli/cli-context.js';
import { UsageError } from '../../../src/errors.js';
import { resolveRun, type RunRecord } from '../../../src/runs/record.js';
import { ROOT } from '../../helpers/cli.js';

let dir: string;
let ctx: CliContext;

beforeEach(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'engine-of-run-'));
  ctx = {
    stdout: new PassThrough(),
    stderr: new PassThrough(),
    isTTY: false,
    cwd: dir,
    env: { HOME: dir },
    signal: new AbortController().signal,
  };
  await writeFile(
    path.join(dir, 'engines.yaml'),
    'engines:\n  - name: box-a\n    host: unix:///run/box-a.sock\n  - name: box-b\n    host: unix:///run/box-b.sock\n',
  );
});

afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

const record = (extra: Partial<RunRecord>): RunRecord => ({ id: 'run-1', ...extra }) as RunRecord;

describe('the engine of a run', () => {
  it('is the one its record names, reached by the record’s reference', async () => {
    const backend = await backendOfRun(
      ctx,
      record({ engine: 'box-b', engineRef: { file: path.join(dir, 'engines.yaml'), entry: 'box-b' } }),
      {},
    );
    expect(backend.engine).toBe('box-b');
  });

  it('is reached through the backend its reference names, whose fields only that backend reads', async () => {
    const backend = await backendOfRun(
      ctx,
      record({
        engine: 'box-b',
        engineRef: { backend: 'docker', file: path.join(dir, 'engines.yaml'), entry: 'box-b' },
      }),
      {},
    );
    expect(backend.engine).toBe('box-b');
    await expect(
      backendOfRun(ctx, record({ engine: 'box-z', engineRef: { backend: 'docker', context: 'gone' } }), {}),
    ).rejects.toThrow(
      /ran on engine box-z, which cannot be reached as its record says \(docker context gone\)/,
    );
  });

  it('of an old record (a reference from before references named their backend) is still found', async () => {
    const runsDir = path.join(ROOT, 'tests', 'fixtures', 'runs', 'engine-ref-before-backend');
    const stored = await resolveRun(runsDir, 'last');
    expect(stored.record.engineRef).toEqual({ url: 'unix:///run/box-a.sock' });
    const backend = await backendOfRun(ctx, stored.record, {});
    expect(backend.engine).toBe('box-a');
  });

  it('is looked up by name among the engines the user names, which win over the record', async () => {
    const backend = await backendOfRun(
      ctx,
      record({ engine: 'box-a', engineRef: { context: 'gone-context' } }),
      { engines: 'engines.yaml' },
    );
    expect(backend.engine).toBe('box-a');
    const error = await backendOfRun(ctx, record({ engine: 'box-c' }), { engines: 'engines.yaml' }).catch(
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(UsageError);
    expect((error as Error).message).toBe(
      'run run-1 ran on engine box-c, which is not among the engines named (box-a, box-b)',
    );
  });

  it('says what to do when the record’s reference leads nowhere, or there is none for a remote engine', async () => {
    await expect(
      backendOfRun(
        ctx,
        record({ engine: 'box-z', engineRef: { file: path.join(dir, 'engines.yaml'), entry: 'box-z' } }),
        {},
      ),
    ).rejects.toThrow(
      /ran on engine box-z, which cannot be reached as its record says \(entry box-z of .*engines\.yaml\): .*no longer lists an engine named box-z/,
    );
    await expect(backendOfRun(ctx, record({ engine: 'box-z' }), {})).rejects.toThrow(
      'run run-1 ran on engine box-z, and its record does not say how to reach it',
    );
  });

  it('is the local engine for a run without an engine or on `local`', async () => {
    expect((await backendOfRun(ctx, record({}), {})).engine).toBe('local');
    expect((await backendOfRun(ctx, record({ engine: 'local' }), {})).engine).toBe('local');
  });
});
