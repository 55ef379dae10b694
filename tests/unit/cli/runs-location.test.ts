import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { exitCodeForError } from '../../../src/cli/exit-codes.js';
import { inspectCommand } from '../../../src/cli/commands/inspect.js';
import { runsCommand } from '../../../src/cli/commands/runs.js';
import { capturedContext } from '../../helpers/cli.js';

const roots: string[] = [];
afterEach(async () => {
  await Promise.all(roots.splice(0).map((r) => rm(r, { recursive: true, force: true })));
});

async function codeOf(promise: Promise<unknown>): Promise<{ code: number; message: string }> {
  try {
    await promise;
  } catch (error) {
    return { code: exitCodeForError(error), message: (error as Error).message };
  }
  return { code: 0, message: '' };
}

describe('runs and inspect with two catalogs in ./catalog/', () => {
  it('refuse the same way (exit 2, naming both), never "No runs recorded"', async () => {
    const root = await mkdtemp(join(tmpdir(), 'sandbox-harness-runs-'));
    roots.push(root);
    await mkdir(join(root, 'catalog'));
    await writeFile(join(root, 'catalog', 'a.yaml'), 'name: a\n');
    await writeFile(join(root, 'catalog', 'b.yaml'), 'name: b\n');
    const ctx = capturedContext(root);
    const runs = await codeOf(runsCommand(ctx, {}));
    const inspect = await codeOf(inspectCommand(capturedContext(root), 'last', {}));
    expect(runs.code).toBe(2);
    expect(runs.message).toMatch(
      /several catalogs found, pick one with --catalog: catalog\/a\.yaml, catalog\/b\.yaml/,
    );
    expect(inspect).toEqual(runs);
    expect(ctx.out()).not.toContain('No runs recorded');
  });

  it('with no catalog at all, runs still says there are none (exit 0)', async () => {
    const root = await mkdtemp(join(tmpdir(), 'sandbox-harness-runs-'));
    roots.push(root);
    const ctx = capturedContext(root);
    expect(await runsCommand(ctx, {})).toBe(0);
    expect(ctx.out()).toContain('No runs recorded');
  });
});
