/**
 * One suite, two agents, side by side: `eval --agent builtin --agent command` on the bundled
 * example. The built-in loop is scripted by the fake model server on loopback; the `command`
 * agent is a program of the image that makes the change without a model call. Each agent's
 * trials land in `<out>/<agent>/`, each trial result names its agent, and `agents.md` puts
 * them side by side (pass rate with its interval, pass@k, cost per solved task, time).
 * It runs what docs/agents.md shows under "Evals across agents".
 */
import { afterAll, describe, expect, it } from 'vitest';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { exampleCopy, removeExampleCopies } from '../helpers/example.js';
import { cleanEnv, runCli } from '../helpers/cli.js';
import { startFakeModelServer, type FakeModelServer } from '../fake-model-server/server.js';

let server: FakeModelServer | undefined;

afterAll(async () => {
  await server?.close().catch(() => undefined);
  await removeExampleCopies();
});

describe('eval with two agents', () => {
  it('runs the suite once per agent and writes them side by side', async () => {
    server = await startFakeModelServer([
      {
        reply: {
          model: 'fake-model',
          content: [
            {
              type: 'tool_use',
              id: 'e1',
              name: 'edit_file',
              input: {
                path: 'src/shipping.ts',
                search: 'FREE_SHIPPING_THRESHOLD = 50;',
                replacement: 'FREE_SHIPPING_THRESHOLD = 39;',
              },
            },
          ],
        },
      },
      { reply: { model: 'fake-model', content: [{ type: 'text', text: 'Done.' }] } },
    ]);
    const copy = await exampleCopy();
    const sed = "sed -i 's/FREE_SHIPPING_THRESHOLD = 50/FREE_SHIPPING_THRESHOLD = 39/' src/shipping.ts";
    const catalog = await readFile(copy.catalog, 'utf8');
    await writeFile(
      copy.catalog,
      catalog
        .replace('agent:\n', `agent:\n  command: ${JSON.stringify(sed)}\n`)
        .replace('maxAttempts: 3', 'maxAttempts: 1'),
    );
    const suite = join(copy.root, 'suite.yaml');
    await writeFile(
      suite,
      [
        'name: two-agents',
        'defaults: { n: 1, concurrency: 1, keep: never, provider: anthropic, model: fake-model }',
        'tasks:',
        '  - { id: ops-412, catalog: shipping-service.yaml, ticket: tickets/OPS-412.md }',
        '',
      ].join('\n'),
    );
    const out = join(copy.root, 'out');
    const result = await runCli(
      ['eval', suite, '--agent', 'builtin', '--agent', 'command', '--out', out, '--json'],
      {
        cwd: copy.root,
        env: cleanEnv({ ANTHROPIC_API_KEY: 'sk-test-key', ANTHROPIC_BASE_URL: server.anthropicBaseUrl }),
      },
    );
    expect(result.code, result.stdout + result.stderr).toBe(0);
    const json = JSON.parse(result.stdout) as {
      sideBySide: string;
      agents: Record<string, { summary: { overall: { passes: number; scored: number } } }>;
    };
    expect(Object.keys(json.agents)).toEqual(['builtin', 'command']);
    for (const agent of ['builtin', 'command']) {
      expect(json.agents[agent]!.summary.overall).toMatchObject({ passes: 1, scored: 1 });
      const trial = JSON.parse((await readFile(join(out, agent, 'results.jsonl'), 'utf8')).trim()) as {
        agent?: string;
      };
      expect(trial.agent).toBe(agent);
    }
    const page = await readFile(json.sideBySide, 'utf8');
    expect(page).toMatch(/^# Agents side by side: two-agents/);
    expect(page).toMatch(/\| builtin \| 1\/1 \| 100% \| \[[\d.]+%, 100%\] \| @1 100% \|/);
    expect(page).toMatch(/\| command \| 1\/1 \| 100% \|/);
    // The built-in loop made both model calls; the command agent none.
    expect(server.modelRequests()).toHaveLength(2);
  }, 900_000);
});
