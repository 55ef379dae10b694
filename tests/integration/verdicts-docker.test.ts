/**
 * Honest verdicts on real Docker, through the whole `fix` flow with a scripted model: what
 * comes back is exactly what was verified, whatever the agent does in its sandbox. Each case
 * is one class of attack: a repo that ships a folder link under an editable glob, a link
 * swapped for a folder, a background writer that outlives the loop, tens of thousands of new
 * files, and the run time limit.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cp, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runFix, type FixOptions } from '../../src/fix/run-fix.js';
import { fixDeps } from '../../src/fix/deps.js';
import { sandboxProvider } from '../../src/sandbox/backend-registry.js';
import { dockerEngine } from '../../src/sandbox/docker/engine/index.js';
import { LABEL } from '../../src/sandbox/docker/labels.js';
import { ensureBaseImage } from '../../src/sandbox/docker/images/ensure-base.js';
import { FIXTURES, requireDocker } from '../helpers/docker.js';
import { scripted, text, toolUse, type Turn } from '../unit/agent/helpers.js';

const roots: string[] = [];
const runIds: string[] = [];

async function fixture(catalogExtra = ''): Promise<{ root: string; repo: string; catalog: string }> {
  const root = await mkdtemp(join(tmpdir(), 'sandbox-harness-verdicts-'));
  roots.push(root);
  const repo = join(root, 'repo');
  await cp(join(FIXTURES, 'repos', 'linked'), repo, { recursive: true, verbatimSymlinks: true });
  const catalog = join(root, 'linked.yaml');
  await writeFile(
    catalog,
    [
      'name: linked',
      'owner: tests',
      'repo: repo',
      'rules: {}',
      'agent:',
      '  editableFiles: ["src/**"]',
      '  testCommand: npm test',
      '  maxAttempts: 1',
      '  maxTurns: 5',
      'sandbox:',
      '  timeouts: { commandSec: 60, testSec: 60' + catalogExtra + ' }',
      '',
    ].join('\n'),
  );
  return { root, repo, catalog };
}

async function fix(turns: Turn[], options: Partial<FixOptions> & { catalogExtra?: string } = {}) {
  const { root, repo, catalog } = await fixture(options.catalogExtra);
  const provider = scripted(turns);
  const result = await runFix(
    {
      ticket: 'Make the limit 12.',
      catalogFile: catalog,
      keep: 'never',
      apply: false,
      force: false,
      rebuild: false,
      cwd: root,
      env: {},
      signal: new AbortController().signal,
      readStdin: async () => '',
      provider: 'replay',
      ...options,
    },
    fixDeps(await sandboxProvider(), { createProvider: async () => provider }),
  );
  runIds.push(result.runId);
  return { result, repo, provider };
}

const run = (id: string, command: string) => toolUse(id, 'run_command', { command });

describe('honest verdicts with real Docker', () => {
  beforeAll(async () => {
    await requireDocker();
    await ensureBaseImage('node', {});
  }, 900_000);

  afterAll(async () => {
    // Only what these tests made, by their run ids.
    for (const id of runIds) {
      for (const c of await dockerEngine().containers.list({ [LABEL.run]: id }))
        await dockerEngine().containers.remove(c.id);
    }
    await Promise.all(roots.map((r) => rm(r, { recursive: true, force: true })));
  });

  it('a file written through a folder link the repo ships is judged where it really landed', async () => {
    const { result, repo, provider } = await fix([
      // The spelled path matches src/**; the shell follows the link to package.json at the root.
      { content: [run('a', `printf '{"scripts":{"test":"true"}}' > src/shared/package.json`)] },
      // The write tool refuses the link outright.
      {
        content: [
          toolUse('b', 'write_file', { path: 'src/shared/test/app.test.js', content: 'process.exit(0);\n' }),
        ],
      },
      { content: [text('done')] },
    ]);
    expect(result.outcome).toBe('rejected');
    const offences = result.record.attempts[0]?.gate?.offences ?? [];
    expect(offences).toEqual([expect.objectContaining({ path: 'package.json', kind: 'not-editable' })]);
    const writeResult = JSON.stringify(provider.requests[2]?.messages.at(-1));
    expect(writeResult).toMatch(
      /src\/shared is a symbolic link; files are never read or written through a link/,
    );
    expect(await readFile(join(repo, 'package.json'), 'utf8')).not.toContain('"test":"true"');
  });

  it('a folder link swapped for a real folder is a change of its own, and what is under it is refused', async () => {
    const { result } = await fix([
      {
        content: [
          run(
            'a',
            'rm src/shared && mkdir -p src/shared/test && echo "process.exit(0)" > src/shared/test/app.test.js',
          ),
        ],
      },
      { content: [text('done')] },
    ]);
    expect(result.outcome).toBe('rejected');
    const offences = (result.record.attempts[0]?.gate?.offences ?? []).map((o) => [o.path, o.kind]);
    expect(offences).toEqual(
      expect.arrayContaining([
        ['src/shared', 'type-changed'],
        ['src/shared/test/app.test.js', 'through-link'],
      ]),
    );
  });

  it('a background writer that outlives the loop is stopped before the change is read: the patch is what was verified', async () => {
    const { result } = await fix(
      [
        {
          content: [
            toolUse('e', 'edit_file', {
              path: 'src/app.js',
              search: 'limit = 10',
              replacement: 'limit = 12',
            }),
          ],
        },
        {
          content: [
            run('w', "(while :; do echo '// more' >> src/app.js; sleep 0.02; done) > /dev/null 2>&1 &"),
          ],
        },
        { content: [text('done')] },
      ],
      { keep: 'always' },
    );
    expect(result.outcome).toBe('ready-for-review');
    const patch = await readFile(join(result.runDir, 'patch.diff'), 'utf8');
    const added = patch.split('\n').filter((l) => l === '+// more').length;
    expect(added).toBeGreaterThan(0);
    // The kept attempt sandbox still holds exactly the bytes that were exported then: nothing
    // wrote after the freeze, although verification ran for a while before it was stopped.
    const attempt = result.record.containers.find((c) => c.role === 'attempt-1')!;
    const { backend } = await sandboxProvider();
    const kept = await backend.attach({ id: attempt.id, runId: result.runId });
    try {
      const now = (await kept.readFile('src/app.js')).toString();
      expect(now.split('\n').filter((l) => l === '// more').length).toBe(added);
    } finally {
      await kept.dispose();
    }
  });

  it('30,000 new files are refused on their count, in seconds, without reading one back', async () => {
    const started = Date.now();
    const { result } = await fix([
      { content: [run('g', 'mkdir -p src/gen && cd src/gen && seq 1 30000 | xargs touch')] },
      { content: [text('done')] },
    ]);
    expect(result.outcome).toBe('rejected');
    expect(result.record.attempts[0]?.gate?.offences).toEqual([
      expect.objectContaining({
        kind: 'too-many',
        why: expect.stringMatching(/30000 paths changed, over the limit of 200/),
      }),
    ]);
    expect(result.record.attempts[0]?.changedCount).toBe(30000);
    // The bound is about behaviour: before, one archive request per file took about 20 minutes.
    expect(Date.now() - started).toBeLessThan(120_000);
  });

  it('the run time limit ends the run as timeout, and leaves no container behind', async () => {
    const { result } = await fix([{ content: [run('s', 'sleep 300')] }], { catalogExtra: ', runSec: 8' });
    expect(result.outcome).toBe('timeout');
    expect(result.error?.code).toBe('RUN_TIMEOUT');
    expect(await dockerEngine().containers.list({ [LABEL.run]: result.runId })).toEqual([]);
  });
});
