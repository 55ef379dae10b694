/**
 * A run record written before records named their backend (no `backend`, a hex Docker id)
 * still opens where a person reads it: `inspect` and the viewer.
 */
import { mkdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { inspectCommand } from '../../../src/cli/commands/inspect.js';
import { renderPage } from '../../../src/view/site.js';
import { openViewSource } from '../../../src/view/source.js';
import { capturedContext } from '../../helpers/cli.js';
import { tempDir, writeRun } from '../view/fixtures.js';

let dir: string;
let remove: () => Promise<void>;
let runs: string;
const ID = '20261130-100000-abc123';

beforeEach(async () => {
  ({ dir, remove } = await tempDir());
  runs = join(dir, 'repo', '.sandbox-harness', 'runs');
  await mkdir(runs, { recursive: true });
  // Nothing kept: inspect has no engine to ask, so this stays a test of the record alone.
  await writeRun(runs, ID, { kept: false });
});
afterEach(() => remove());

describe('an old-shape run record', () => {
  it('has no backend and a hex container id, and opens in inspect and in the viewer', async () => {
    const record = JSON.parse(await readFile(join(runs, ID, 'run.json'), 'utf8')) as Record<string, unknown>;
    expect(record.backend).toBeUndefined();
    expect((record.containers as { id: string }[])[0]?.id).toMatch(/^[0-9a-f]{64}$/);

    const ctx = capturedContext(join(dir, 'repo'));
    expect(await inspectCommand(ctx, ID, { runsDir: runs, json: true })).toBe(0);
    expect((JSON.parse(ctx.out()) as { id?: string; record?: { id?: string } }).record?.id ?? '').toBe(ID);

    const source = await openViewSource(join(dir, 'repo'));
    const html = await renderPage(source, `runs/${ID}.html`, new URLSearchParams(), { exported: false });
    expect(html).toContain(ID);
  });
});
