/**
 * Credentials stay on the host, through the whole `fix` and `eval` paths on real Docker.
 * The host environment holds key-shaped canaries (both model keys, usual token names, a
 * variable whose name is itself unique); the model (the fake server, spoken to through the
 * real SDK with one of those keys) has the sandbox print its environment, pid 1's
 * environment and home folder, and search every file it can read for anything shaped like
 * a canary. Then, from the host: the daemon's configuration of every container of the run,
 * the configuration and history of the run's image, the transcript, run record, event log,
 * test outputs, the cassette written by `--record`, the eval's results and reports, and
 * the CLI's own output. The canary is in none of them, and each check is shown to have
 * seen the sandbox's real environment, so an empty result cannot pass for a clean one.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cp, readdir, readFile, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { exampleCopy, liveFixArgs, removeExampleCopies } from '../helpers/example.js';
import { ensureBaseImage } from '../../src/sandbox/docker/images/ensure-base.js';
import { dockerEngine } from '../../src/sandbox/docker/engine/index.js';
import { LABEL } from '../../src/sandbox/docker/labels.js';
import type { AssistantContent } from '../../src/llm/types.js';
import { startFakeModelServer, type FakeModelServer } from '../fake-model-server/server.js';
import { runCli, ROOT } from '../helpers/cli.js';
import { canaryEnv, expectNoCanary, expectNoCanaryIn } from '../helpers/canary.js';
import { engineGet } from '../helpers/engine-api.js';

/** Everything the sandbox can see of its environment and of what its image was built with. */
const LOOK_AROUND =
  "env; echo '--- pid 1'; tr '\\0' '\\n' < /proc/1/environ; echo; echo '--- home'; ls -la ~; " +
  "echo '--- image'; ls -la / /workspace; cat ~/.npmrc /workspace/.npmrc /workspace/.env 2>&1; " +
  "echo '--- canary-shaped strings in every readable file'; " +
  "grep -rIhoE 'canary[0-9a-f]{24}' / --exclude-dir=proc --exclude-dir=sys 2>/dev/null | sort -u; echo '--- end'";

const LOOK_TURN: AssistantContent[] = [
  { type: 'text', text: 'Before anything else: what can this sandbox see?' },
  { type: 'tool_use', id: 'look1', name: 'run_command', input: { command: LOOK_AROUND } },
];

async function demoTurns(): Promise<AssistantContent[][]> {
  const demo = JSON.parse(
    await readFile(join(ROOT, 'examples', 'shipping-service', 'cassettes', 'OPS-412.json'), 'utf8'),
  ) as { turns: { content: AssistantContent[] }[] };
  return demo.turns.map((t) => t.content);
}

/** The daemon's view of every container of a run, and of the image they were made from. */
async function engineViewOfRun(runId: string): Promise<{ containers: number; text: string }> {
  const containers = await dockerEngine().containers.list({ [LABEL.run]: runId });
  const parts: unknown[] = [];
  const images = new Set<string>();
  for (const c of containers) {
    const details = await engineGet<{ Image: string }>(`/containers/${c.id}/json`);
    parts.push(details);
    if (details) images.add(details.Image);
  }
  for (const image of images) {
    const config = await engineGet(`/images/${image}/json`);
    const history = await engineGet<{ CreatedBy: string }[]>(`/images/${image}/history`);
    // The history is really there: the build's own steps (the workspace COPY) are listed.
    expect(history?.some((h) => /COPY/.test(h.CreatedBy))).toBe(true);
    parts.push(config, history);
  }
  return { containers: containers.length, text: JSON.stringify(parts) };
}

/** The sandbox really looked: its own variables and every section of the look-around are there. */
function expectLookedAround(text: string): void {
  for (const seen of [
    'SANDBOX_HARNESS=1',
    'SERVICE_CATALOG=',
    '--- pid 1',
    '--- home',
    '--- image',
    '--- end',
  ])
    expect(text).toContain(seen);
}

/** The model got the sandbox's look-around back, and no request it got holds the canary. */
function expectModelSawNoCanary(server: FakeModelServer, canary: string): void {
  expectLookedAround(
    server
      .modelRequests()
      .map((r) => r.rawBody)
      .join('\n'),
  );
  for (const r of server.requests) expectNoCanaryIn(canary, r.rawBody, 'a request to the model server');
}

// A full fix and a full eval with every container kept for the checks: minutes when loaded.
describe(
  'no credential of the host reaches a sandbox, an image or a record (real Docker)',
  { timeout: 600_000 },
  () => {
    let server: FakeModelServer | undefined;
    const runIds = new Set<string>();

    beforeAll(async () => {
      await dockerEngine().ping(5000);
      await ensureBaseImage('node', {});
    }, 900_000);

    afterAll(async () => {
      // The containers first: they were kept for the checks and must go even if one failed.
      for (const runId of runIds) await runCli(['gc', '--run', runId]);
      await server?.close();
      await removeExampleCopies();
    });

    it('fix: through the agent, the baseline, verification and --record', async () => {
      const copy = await exampleCopy();
      const demo = await demoTurns();
      const turns = [demo[0]!, LOOK_TURN, ...demo.slice(1)];
      server = await startFakeModelServer(turns.map((content) => ({ reply: { content } })));
      const { canary, variables, env } = canaryEnv({ ANTHROPIC_BASE_URL: server.anthropicBaseUrl });
      const recording = join(copy.root, 'recorded.json');
      const live = await runCli(liveFixArgs(copy, 'anthropic', recording, '--keep', 'always'), {
        cwd: copy.root,
        env,
      });
      const result = JSON.parse(live.stdout) as { runId: string; runDir: string; outcome: string };
      runIds.add(result.runId);
      expect(result.outcome, live.stderr).toBe('ready-for-review');
      // The key was used for real: the model server got it, in a header.
      expect(JSON.stringify(server.modelRequests().map((r) => r.headers))).toContain(
        variables.ANTHROPIC_API_KEY,
      );

      const transcript = await readFile(join(result.runDir, 'transcript.json'), 'utf8');
      expectLookedAround(transcript);
      expectModelSawNoCanary(server, canary);

      const engine = await engineViewOfRun(result.runId);
      // Baseline, attempt and verification containers, all kept for this check.
      expect(engine.containers).toBeGreaterThanOrEqual(3);
      expect(engine.text).toContain('SERVICE_CATALOG=');
      expectNoCanaryIn(canary, engine.text, "the daemon's view of the run's containers and image");

      // Transcript, run record, event log, test outputs, patch, image build log; the recording.
      const files = await expectNoCanary(canary, result.runDir, recording);
      expect(files).toBeGreaterThanOrEqual(6);
      expect(await readFile(recording, 'utf8')).toContain('/proc/1/environ');
      expectNoCanaryIn(canary, live.stdout + live.stderr, "the CLI's output");
    });

    it('eval: every trial, its containers, records and the reports', async () => {
      const copy = await exampleCopy();
      const root = dirname(copy.root);
      await cp(join(ROOT, 'examples', 'evals'), join(root, 'evals'), { recursive: true });
      const suite = join(root, 'evals', 'canary-suite.yaml');
      await writeFile(
        suite,
        [
          'name: canary',
          'defaults:',
          '  n: 1',
          '  provider: anthropic',
          '  keep: always',
          'tasks:',
          '  - id: look-then-fix',
          '    catalog: shipping-eval.yaml',
          '    ticket: ../shipping-service/tickets/OPS-412.md',
          '',
        ].join('\n'),
      );
      const demo = await demoTurns();
      await server?.close();
      server = await startFakeModelServer([LOOK_TURN, ...demo].map((content) => ({ reply: { content } })));
      const { canary, env } = canaryEnv({ ANTHROPIC_BASE_URL: server.anthropicBaseUrl });
      const out = join(root, 'out');
      const r = await runCli(['eval', suite, '--out', out, '--json'], { cwd: root, env });
      expect(r.code, r.stderr).toBe(0);
      const results = (await readFile(join(out, 'results.jsonl'), 'utf8'))
        .split('\n')
        .filter(Boolean)
        .map((line) => JSON.parse(line) as { runId: string; outcome: string });
      expect(results.map((x) => x.outcome)).toEqual(['passed']);
      for (const x of results) runIds.add(x.runId);

      expectModelSawNoCanary(server, canary);
      for (const x of results) {
        const engine = await engineViewOfRun(x.runId);
        expect(engine.containers).toBeGreaterThanOrEqual(3);
        expectNoCanaryIn(canary, engine.text, `the daemon's view of trial ${x.runId}`);
      }
      // results.jsonl, summary.json, report.md/html, the eval's events and every trial's run record.
      const [trialDir] = await readdir(join(out, 'runs'));
      expectLookedAround(await readFile(join(out, 'runs', trialDir!, 'transcript.json'), 'utf8'));
      expect(await expectNoCanary(canary, out)).toBeGreaterThanOrEqual(8);
      expectNoCanaryIn(canary, r.stdout + r.stderr, "the CLI's output");
    });
  },
);
