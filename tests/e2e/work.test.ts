/**
 * `work` end to end on real Docker with replayed models: a backlog of four items on a copy
 * of the bundled example, where item two depends on item one. Killed while item two runs and
 * started again, it finishes without redoing item one; items one to three end passing with
 * their patches applied in order; item four's verification fails, so it is blocked with its
 * output.
 *
 * Every item's catalog tests with `grep`s for what the item must add (and item two's also for
 * item one's change, so it passes only on top of item one): a baseline, a verification and an
 * item's verification take a container start instead of the example's TypeScript build, which
 * ran ten times here and took minutes each on a loaded CI machine. The example's real test
 * command is what fix.test.ts runs; this file is about the backlog.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { dockerEngine } from '../../src/sandbox/docker/engine/index.js';
import { ensureBaseImage } from '../../src/sandbox/docker/images/ensure-base.js';
import { runCli, startCli } from '../helpers/cli.js';
import type { ExampleCopy } from '../../src/demo.js';
import { exampleCopy, removeExampleCopies } from '../helpers/example.js';

const STANDARD = 'export const STANDARD_SHIPPING_FEE = 4.95; // EUR';

/** A catalog like the example's whose tests are that src/shipping.ts has every marker. */
function catalogNeeding(original: string, markers: string[]): string {
  const greps = markers.map((m) => `grep -q "${m}" src/shipping.ts`).join(' && ');
  return original.replace(/testCommand: .*/, `testCommand: ${greps}`);
}

/** A recorded model that replaces `search` in src/shipping.ts, then says it is done. */
function cassetteEditing(search: string, replacement: string): string {
  return JSON.stringify({
    version: 1,
    model: 'recorded-backlog',
    turns: [
      {
        content: [
          {
            type: 'tool_use',
            id: 'e1',
            name: 'edit_file',
            input: { path: 'src/shipping.ts', search, replacement },
          },
        ],
        stopReason: 'tool_use',
      },
      { content: [{ type: 'text', text: 'Added.' }], stopReason: 'end_turn' },
    ],
  });
}

async function stateOf(
  file: string,
): Promise<{ items: Record<string, { status: string; runId?: string; reason?: string; output?: string }> }> {
  return JSON.parse(await readFile(file, 'utf8'));
}

describe('work end to end (real Docker, replayed models)', { timeout: 900_000 }, () => {
  let copy: ExampleCopy;
  let backlog: string;
  let stateFile: string;

  beforeAll(async () => {
    await dockerEngine().ping(5000);
    await ensureBaseImage('node', {});
    copy = await exampleCopy();
    const original = await readFile(copy.catalog, 'utf8');
    const items = [
      {
        id: 'two',
        // Item one's threshold too: item two's tests pass only on top of item one.
        markers: ['FREE_SHIPPING_THRESHOLD = 39;', 'EXPRESS_SHIPPING_FEE = 9.95'],
        line: 'export const EXPRESS_SHIPPING_FEE = 9.95; // EUR',
      },
      { id: 'three', markers: ['MAX_PARCEL_KG = 30'], line: 'export const MAX_PARCEL_KG = 30;' },
      { id: 'four', markers: ['GIFT_WRAP_FEE = 2'], line: 'export const GIFT_WRAP_FEE = 2; // EUR' },
    ];
    // Item one is the example's ticket, OPS-412: the threshold set to the catalog's 39.
    await writeFile(join(copy.root, 'one.yaml'), catalogNeeding(original, ['FREE_SHIPPING_THRESHOLD = 39;']));
    await writeFile(
      join(copy.root, 'one.json'),
      cassetteEditing('FREE_SHIPPING_THRESHOLD = 50;', 'FREE_SHIPPING_THRESHOLD = 39;'),
    );
    for (const item of items) {
      await writeFile(join(copy.root, `${item.id}.yaml`), catalogNeeding(original, item.markers));
      await writeFile(
        join(copy.root, `${item.id}.json`),
        cassetteEditing(STANDARD, `${STANDARD}\n${item.line}`),
      );
    }
    backlog = join(copy.root, 'backlog.yaml');
    stateFile = join(copy.root, 'backlog.state.json');
    await writeFile(
      backlog,
      `catalog: shipping-service.yaml
items:
  - id: one
    ticket: OPS-412
    catalog: one.yaml
    cassette: one.json
  - id: two
    ticket: Add an express shipping fee of 9.95 EUR as EXPRESS_SHIPPING_FEE.
    catalog: two.yaml
    cassette: two.json
    dependsOn: [one]
  - id: three
    ticket: Add the parcel weight limit, 30 kg, as MAX_PARCEL_KG.
    catalog: three.yaml
    cassette: three.json
    dependsOn: [two]
    verify: grep -q "= 39;" src/shipping.ts && grep -q EXPRESS_SHIPPING_FEE src/shipping.ts && grep -q MAX_PARCEL_KG src/shipping.ts
  - id: four
    ticket: Add a gift-wrap fee of 2 EUR as GIFT_WRAP_FEE.
    catalog: four.yaml
    cassette: four.json
    verify: echo "gift wrapping is not offered yet"; exit 3
`,
    );
  }, 900_000);

  afterAll(async () => {
    const runs = await readdir(join(copy.repo, '.sandbox-harness', 'runs')).catch(() => [] as string[]);
    for (const runId of runs) await runCli(['gc', '--run', runId, '--json']);
    await removeExampleCopies();
  });

  it('killed during item two and started again, it finishes without redoing item one; patches applied in order; a failing verification blocks with its output', async () => {
    const first = startCli(['work', backlog, '--json'], { cwd: copy.root });
    const deadline = Date.now() + 600_000;
    for (;;) {
      if (Date.now() > deadline) throw new Error('item two never started');
      const state = await stateOf(stateFile).catch(() => undefined);
      if (state?.items['two']?.status === 'running') break;
      await new Promise((r) => setTimeout(r, 200));
    }
    first.child.kill('SIGKILL');
    await first.done;
    const midway = await stateOf(stateFile);
    expect(midway.items['one']?.status).toBe('passing');
    const oneRun = midway.items['one']?.runId;
    expect(oneRun).toBeTruthy();

    const second = await runCli(['work', backlog, '--json'], { cwd: copy.root });
    expect(second.code, second.stderr).toBe(1);
    const final = await stateOf(stateFile);
    expect(final.items['one']).toMatchObject({ status: 'passing', runId: oneRun });
    expect(final.items['two']?.status).toBe('passing');
    expect(final.items['three']?.status).toBe('passing');
    expect(final.items['four']).toMatchObject({
      status: 'blocked',
      reason: expect.stringMatching(/verification failed \(exit 3\)/),
      output: expect.stringContaining('gift wrapping is not offered yet'),
    });
    const source = await readFile(join(copy.repo, 'src', 'shipping.ts'), 'utf8');
    // Every patch on top of the one before it, in the backlog's order.
    expect(source).toMatch(/FREE_SHIPPING_THRESHOLD = 39;/);
    const express = source.indexOf('EXPRESS_SHIPPING_FEE');
    const parcel = source.indexOf('MAX_PARCEL_KG');
    expect(express).toBeGreaterThan(0);
    expect(parcel).toBeGreaterThan(0);
    expect(source).toContain('GIFT_WRAP_FEE');

    const status = await runCli(['work', backlog, '--status'], { cwd: copy.root });
    expect(status.stdout).toMatch(/^one\s+passing/m);
    expect(status.stdout).toMatch(/^four\s+blocked/m);
    expect(status.code).toBe(1);
  });
});
