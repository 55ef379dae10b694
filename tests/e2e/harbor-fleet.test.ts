/**
 * A Harbor task over a fleet, for real: the example task folder (examples/harbor), its oracle,
 * two trials over the local engine and one extra engine on this machine (its own network
 * namespace, TCP with mutual TLS; tests/helpers/engines.ts), run by the built CLI. The extra
 * engine starts with no image at all: the environment's own FROM image (here a tag only the
 * local engine has) is shipped there and the environment is built there, and the trial there
 * scores 1.0 like the local one. Everything started here is stopped here.
 */
import { randomBytes } from 'node:crypto';
import { cp, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dockerEngine } from '../../src/sandbox/docker/engine/index.js';
import { DEFAULT_BASE_IMAGE } from '../../src/sandbox/docker/images/base-images.js';
import { ensureBaseImage } from '../../src/sandbox/docker/images/ensure-base.js';
import { LABEL } from '../../src/sandbox/docker/labels.js';
import { cleanEnv, ROOT, runCli } from '../helpers/cli.js';
import { startEngines, stopEngines, type TestEngine } from '../helpers/engines.js';

interface Result {
  taskId: string;
  trial: number;
  category: string;
  engine: string;
  runId?: string;
  score?: number;
  reward?: { values?: Record<string, number>; refused?: string };
}

const TASK = 'shipping-ops-412';
// A FROM image of the task's own that no fresh engine has: the harness's base under another name.
const FROM_REPO = 'sandbox-harness-test/harbor-fleet-from';
const FROM_TAG = randomBytes(4).toString('hex');

let engines: TestEngine[] = [];
let a: TestEngine;
let root: string;

beforeAll(async () => {
  await dockerEngine().ping(5000);
  await ensureBaseImage('node', { onLine: () => undefined });
  await dockerEngine().images.tag(DEFAULT_BASE_IMAGE, FROM_REPO, FROM_TAG);
  root = await mkdtemp(join(tmpdir(), 'sandbox-harness-harbor-fleet-'));
  const task = join(root, 'tasks', TASK);
  await cp(join(ROOT, 'examples', 'harbor', TASK), task, { recursive: true });
  const dockerfile = join(task, 'environment', 'Dockerfile');
  const text = await readFile(dockerfile, 'utf8');
  await writeFile(dockerfile, text.replace(`FROM ${DEFAULT_BASE_IMAGE}`, `FROM ${FROM_REPO}:${FROM_TAG}`));
  engines = await startEngines({ count: 1 });
  [a] = engines as [TestEngine];
  const tls = (part: string) => join(a.clientTlsDir, `${part}.pem`);
  await writeFile(
    join(root, 'engines.yaml'),
    [
      'engines:',
      '  - context: default',
      '    capacity: 1',
      '  - name: a',
      `    host: ${a.url}`,
      `    tls: { ca: ${tls('ca')}, cert: ${tls('cert')}, key: ${tls('key')} }`,
      '    capacity: 1',
      '',
    ].join('\n'),
  );
}, 600_000);

afterAll(async () => {
  await stopEngines(engines);
  // On the shared local engine: only what this file made.
  const out = join(root ?? '', 'out');
  for (const line of (await readFile(join(out, 'results.jsonl'), 'utf8').catch(() => '')).split('\n')) {
    const runId = line.trim() ? (JSON.parse(line) as Result).runId : undefined;
    if (!runId) continue;
    for (const c of await dockerEngine().containers.list({ [LABEL.run]: runId }))
      await dockerEngine().containers.remove(c.id);
  }
  await dockerEngine().images.remove(`${FROM_REPO}:${FROM_TAG}`);
  if (root) await rm(root, { recursive: true, force: true });
}, 120_000);

describe('a Harbor task over two engines', () => {
  it('builds the environment where each trial runs, and both score 1.0 with the oracle', async () => {
    const out = join(root, 'out');
    const r = await runCli(
      [
        'eval',
        join('tasks', TASK),
        '--oracle',
        '-n',
        '2',
        '--engines',
        'engines.yaml',
        '--keep',
        'never',
        '--out',
        out,
        '--json',
      ],
      { cwd: root, env: cleanEnv() },
    );
    expect(r.code, r.stderr).toBe(0);
    const summary = JSON.parse(r.stdout).summary as {
      overall: { scored: number; passes: number };
      harbor: { meanScore: Record<string, number> };
    };
    expect(summary.overall).toMatchObject({ scored: 2, passes: 2 });
    expect(summary.harbor.meanScore).toEqual({ [TASK]: 1 });

    const results = (await readFile(join(out, 'results.jsonl'), 'utf8'))
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as Result);
    expect(results).toHaveLength(2);
    for (const x of results)
      expect(x).toMatchObject({ category: 'ready-for-review', score: 1, reward: { values: { reward: 1 } } });
    // One trial on each engine (capacity 1 each), and the one on a really ran there.
    expect(results.map((x) => x.engine).sort()).toEqual(['a', 'default']);
    const onA = results.find((x) => x.engine === 'a')!;
    const record = JSON.parse(await readFile(join(out, 'runs', onA.runId!, 'run.json'), 'utf8')) as {
      engine: string;
      image: { tag: string };
    };
    expect(record.engine).toBe('a');
    // The environment's FROM image was shipped to a, and its image built there.
    expect(await a.engine.images.inspect(`${FROM_REPO}:${FROM_TAG}`)).toBeDefined();
    expect(await a.engine.images.inspect(record.image.tag)).toBeDefined();
    // The reports carry the rewards.
    expect(await readFile(join(out, 'report.md'), 'utf8')).toContain(`| ${TASK} | 1 | 2 | 2 | 0 |`);
  }, 900_000);
});
