/**
 * Runs that continue, on real Docker with replayed models: a failed run's state is where a
 * `fix --continue` starts (its patch in the fresh sandbox, its feedback given) and reaches
 * ready-for-review; an eval task seeded from the same failed run (`seedRun`) starts each
 * trial from its conversation, patch and feedback; the eval's output folder and the
 * continued run export as Inspect eval logs that validate against Inspect's format.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join, relative } from 'node:path';
import type { ExampleCopy } from '../../src/demo.js';
import { dockerEngine } from '../../src/sandbox/docker/engine/index.js';
import { ensureBaseImage } from '../../src/sandbox/docker/images/ensure-base.js';
import { ROOT, runCli } from '../helpers/cli.js';
import { exampleCopy, removeExampleCopies } from '../helpers/example.js';
import { inspectLogSchema } from '../helpers/inspect-schema.js';

const DOC = '# Shipping rules explained\nThe threshold comes from the catalog, rule freeShippingThreshold.\n';
const SKILL =
  '---\nname: fee-change\ndescription: When a ticket changes a fee or threshold\n---\nChange the constant only, never the tests.\n';
/** USD per million tokens of the cassette's model, in the copy's catalog (`agent.prices`). */
const PRICE = { input: 3, output: 15 };
const USAGE = [
  { inputTokens: 800, outputTokens: 20 },
  { inputTokens: 850, outputTokens: 20 },
  { inputTokens: 900, outputTokens: 30 },
  { inputTokens: 950, outputTokens: 12 },
];
const EXPECTED_USD = USAGE.reduce(
  (sum, u) => sum + (u.inputTokens * PRICE.input + u.outputTokens * PRICE.output) / 1e6,
  0,
);

/**
 * Reads the repo's doc and skill, then goes on from the wrong threshold (40): its edit matches
 * only when the earlier run's patch is in the sandbox.
 */
const FINISHES = JSON.stringify({
  version: 1,
  model: 'recorded-finisher',
  turns: [
    { content: [{ type: 'tool_use', id: 'd1', name: 'read_doc', input: { path: 'docs/shipping.md' } }] },
    { content: [{ type: 'tool_use', id: 's1', name: 'skill', input: { name: 'fee-change' } }] },
    {
      content: [
        {
          type: 'tool_use',
          id: 'f1',
          name: 'edit_file',
          input: {
            path: 'src/shipping.ts',
            search: 'FREE_SHIPPING_THRESHOLD = 40;',
            replacement: 'FREE_SHIPPING_THRESHOLD = 39;',
          },
        },
      ],
    },
    { content: [{ type: 'text', text: '39 EUR, as the catalog says.' }] },
  ].map((turn, i) => ({
    ...turn,
    stopReason: i < 3 ? 'tool_use' : 'end_turn',
    usage: USAGE[i],
  })),
});

interface FixJson {
  runId: string;
  runDir: string;
  outcome: string;
  attempts: { n: number; verdict: string }[];
}

async function fixJson(copy: ExampleCopy, args: string[]): Promise<FixJson> {
  const r = await runCli(['fix', 'OPS-412', '--catalog', copy.catalog, '--json', ...args], {
    cwd: copy.root,
  });
  try {
    return JSON.parse(r.stdout) as FixJson;
  } catch {
    throw new Error(`fix did not print JSON (exit ${r.code}):\n${r.stdout}\n${r.stderr}`);
  }
}

describe('runs that continue (real Docker, replayed models)', { timeout: 900_000 }, () => {
  let copy: ExampleCopy;
  let failed: FixJson;
  const runIds: string[] = [];

  beforeAll(async () => {
    await dockerEngine().ping(5000);
    await ensureBaseImage('node', {});
    copy = await exampleCopy();
    await writeFile(join(copy.root, 'finishes.json'), FINISHES);
    // Docs and skills on demand: read from the pristine image by the model's read_doc and skill.
    await mkdir(join(copy.repo, 'docs'), { recursive: true });
    await mkdir(join(copy.repo, 'skills', 'fee-change'), { recursive: true });
    await writeFile(join(copy.repo, 'docs', 'shipping.md'), DOC);
    await writeFile(join(copy.repo, 'skills', 'fee-change', 'SKILL.md'), SKILL);
    const catalog = await readFile(copy.catalog, 'utf8');
    await writeFile(
      copy.catalog,
      catalog.replace(
        '  maxTurns: 20\n',
        `  maxTurns: 20\n  skills: ["skills/*"]\n  prices:\n    recorded-finisher: { input: ${PRICE.input}, output: ${PRICE.output} }\n`,
      ),
    );
    failed = await fixJson(copy, [
      '--cassette',
      join(ROOT, 'tests', 'e2e', 'cassettes', 'wrong-threshold.json'),
      '--max-attempts',
      '1',
    ]);
    runIds.push(failed.runId);
    expect(failed.outcome).toBe('failed');
    expect(failed.attempts.map((a) => a.verdict)).toEqual(['tests-failed']);
  }, 900_000);

  afterAll(async () => {
    // With the catalog named: the eval test writes a second catalog beside it.
    for (const id of runIds) {
      const gc = await runCli(['gc', '--run', id, '--catalog', copy.catalog, '--json'], { cwd: copy.root });
      expect(gc.code, gc.stdout + gc.stderr).toBe(0);
    }
    await removeExampleCopies();
  });

  it("fix --continue reaches ready-for-review from a failed run's state, and exports as an Inspect log", async () => {
    const source = join(copy.repo, 'src', 'shipping.ts');
    expect(await readFile(source, 'utf8')).toMatch(/THRESHOLD = 50;/);
    const continued = await fixJson(copy, ['--continue', failed.runId, '--cassette', 'finishes.json']);
    runIds.push(continued.runId);
    expect(continued.outcome).toBe('ready-for-review');
    // Attempts numbered on from the failed run's one.
    expect(continued.attempts.map((a) => [a.n, a.verdict])).toEqual([[2, 'passed']]);
    expect(await readFile(source, 'utf8')).toMatch(/THRESHOLD = 39;/);
    const record = JSON.parse(await readFile(join(continued.runDir, 'run.json'), 'utf8'));
    expect(record.continuedFrom).toEqual({ runId: failed.runId, attempts: 1 });
    const transcript = JSON.parse(await readFile(join(continued.runDir, 'transcript.json'), 'utf8'));
    const prompt = JSON.stringify(transcript[0].messages[0]);
    expect(prompt).toContain(`continues run ${failed.runId}`);
    expect(prompt).toContain('tests failed');
    // The model read a doc and a skill through the tools, from the pristine image.
    expect(transcript[0].system).toContain('- docs/shipping.md: Shipping rules explained');
    expect(transcript[0].system).toContain('- fee-change: When a ticket changes a fee or threshold');
    const results = transcript[0].messages.flatMap((m: { content: { type: string; content?: string }[] }) =>
      m.content.filter((b) => b.type === 'tool_result'),
    );
    expect(results[0]?.content).toContain('rule freeShippingThreshold');
    expect(results[1]?.content).toContain('Change the constant only, never the tests.');
    // Its cost is the price table times the cassette's usage.
    expect(record.cost.usd).toBeCloseTo(EXPECTED_USD, 9);
    expect(record.cost.prices['recorded-finisher']).toMatchObject(PRICE);
    expect(record.tokens).toEqual({
      input: USAGE.reduce((s, u) => s + u.inputTokens, 0),
      output: USAGE.reduce((s, u) => s + u.outputTokens, 0),
    });

    const exported = await runCli(
      ['export', continued.runId, '--format', 'inspect', '--catalog', copy.catalog],
      {
        cwd: copy.root,
      },
    );
    expect(exported.code, exported.stderr).toBe(0);
    const log = inspectLogSchema.safeParse(JSON.parse(exported.stdout));
    expect(log.success, log.success ? '' : log.error.message).toBe(true);
    expect(log.data!.samples![0]).toMatchObject({
      id: 'OPS-412',
      scores: { verified: { value: 'C', answer: 'ready-for-review' } },
      metadata: { continuedFrom: { runId: failed.runId } },
    });
  });

  it('an eval task seeded from the failed run starts each trial from its conversation, and the eval exports as one Inspect log', async () => {
    // The repo as the failed run found it (the --continue test above applied its fix).
    const source = join(copy.repo, 'src', 'shipping.ts');
    await writeFile(source, (await readFile(source, 'utf8')).replace('THRESHOLD = 39;', 'THRESHOLD = 50;'));
    const suite = join(copy.root, 'seeded.yaml');
    await writeFile(
      suite,
      `name: seeded
tasks:
  - id: from-failed
    catalog: shipping-service.yaml
    ticket: OPS-412
    cassette: finishes.json
    seedRun: ${relative(copy.root, failed.runDir)}
`,
    );
    const out = join(copy.root, 'eval-out');
    const r = await runCli(['eval', suite, '-n', '1', '--out', out, '--json'], { cwd: copy.root });
    expect(r.code, r.stderr).toBe(0);
    const results = (await readFile(join(out, 'results.jsonl'), 'utf8'))
      .split('\n')
      .filter((l) => l.trim())
      .map((l) => JSON.parse(l));
    expect(results).toHaveLength(1);
    expect(results[0]).toMatchObject({
      taskId: 'from-failed',
      category: 'ready-for-review',
      seededFrom: { runId: failed.runId, attempts: 1 },
    });
    // The trial's model went on from the failed run's conversation: recorded in its transcript.
    const earlier = JSON.parse(await readFile(join(failed.runDir, 'transcript.json'), 'utf8'))[0].messages;
    const trialRun = join(out, 'runs', results[0].runId);
    const transcript = JSON.parse(await readFile(join(trialRun, 'transcript.json'), 'utf8'));
    expect(transcript[0].seededMessages).toBe(earlier.length);
    expect(transcript[0].messages.slice(0, earlier.length)).toEqual(earlier);
    expect(JSON.stringify(transcript[0].messages[earlier.length])).toContain(`continues run ${failed.runId}`);
    // The host repo of the task is untouched by the trial.
    expect(await readFile(source, 'utf8')).toMatch(/THRESHOLD = 50;/);

    const exported = await runCli(['export', out, '--format', 'inspect'], { cwd: copy.root });
    expect(exported.code, exported.stderr).toBe(0);
    const log = inspectLogSchema.safeParse(JSON.parse(exported.stdout));
    expect(log.success, log.success ? '' : log.error.message).toBe(true);
    expect(log.data!.status).toBe('success');
    expect(log.data!.eval).toMatchObject({ task: 'seeded', config: { epochs: 1 } });
    const [sample] = log.data!.samples!;
    expect(sample).toMatchObject({ id: 'from-failed', epoch: 1, scores: { verified: { value: 'C' } } });
    expect(sample!.metadata).toMatchObject({ seededFrom: { runId: failed.runId } });
    // The seeded messages are the sample's conversation, but no model event of this trial.
    const seeded = sample!.messages.filter((m) => (m.metadata as { seeded?: boolean } | null)?.seeded);
    expect(seeded.length).toBeGreaterThan(0);
    expect(sample!.events.filter((e) => e.event === 'model')).toHaveLength(USAGE.length);
    expect(results[0].costUsd).toBeCloseTo(EXPECTED_USD, 9);
    expect(Object.values(sample!.model_usage)[0]?.total_cost).toBeCloseTo(EXPECTED_USD, 9);
  });
});
