/**
 * What tests and builds leave behind is not the agent's change, and the attempt sandbox is
 * a git repository of the pristine tree, on real Docker through the whole `fix` flow with a
 * scripted model that runs the tests as a live agent does. The fixtures are small repos the
 * tests write: a tsc/vitest-style one whose test command builds a gitignored `dist/` (76
 * files) and writes `node_modules/.cache`, `node_modules/*\/node_modules/.cache` and a
 * `.tsbuildinfo`; and a pytest-style one. There is no Python base image on these machines
 * (`sandbox-harness/base-python:3` is not built here), so its test command is a shell script
 * that checks the fix and writes what pytest writes: `.pytest_cache/` and `__pycache__/*.pyc`
 * (binary) next to the sources, under the editable glob.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdir, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { runFix } from '../../src/fix/run-fix.js';
import { fixDeps } from '../../src/fix/deps.js';
import { sandboxProvider } from '../../src/sandbox/backend-registry.js';
import { dockerBackend } from '../../src/sandbox/docker/docker-sandbox.js';
import { dockerEngine } from '../../src/sandbox/docker/engine/index.js';
import { LABEL } from '../../src/sandbox/docker/labels.js';
import { buildRepoImage } from '../../src/sandbox/docker/images/repo-image.js';
import { ensureBaseImage } from '../../src/sandbox/docker/images/ensure-base.js';
import { requireDocker } from '../helpers/docker.js';
import { scripted, text, toolUse, type Turn } from '../unit/agent/helpers.js';

const roots: string[] = [];
const runIds: string[] = [];
const HELD_OUT_MARKER = 'HELDOUT-MARKER-7f3a91';

async function writeTree(dir: string, files: Record<string, string>): Promise<void> {
  for (const [path, content] of Object.entries(files)) {
    await mkdir(dirname(join(dir, path)), { recursive: true });
    await writeFile(join(dir, path), content);
  }
}

const BUILD_JS = `
import { mkdirSync, writeFileSync } from 'node:fs';
// What tsc --build and an ESM loader leave behind.
mkdirSync('dist/esm', { recursive: true });
for (let i = 0; i < 75; i++) writeFileSync('dist/esm/m' + i + '.js', 'export {};\\n');
writeFileSync('dist/index.d.ts', 'export declare const limit: number;\\n');
writeFileSync('tsconfig.tsbuildinfo', '{"version":"5"}');
mkdirSync('node_modules/.cache/esm', { recursive: true });
writeFileSync('node_modules/.cache/esm/loader.json', '{}');
mkdirSync('node_modules/dep/node_modules/.cache', { recursive: true });
writeFileSync('node_modules/dep/node_modules/.cache/x.json', '{}');
mkdirSync('coverage', { recursive: true });
writeFileSync('coverage/lcov.info', 'TN:\\n');
`;

const RUN_JS = `
import { readdirSync } from 'node:fs';
import { limit } from '../src/limit.js';
if (limit !== 12) { console.error('limit is ' + limit + ', expected 12'); process.exit(1); }
// Every other test file there is, by listing (so no file names the held-out one).
for (const f of readdirSync(new URL('.', import.meta.url))) if (f.endsWith('.test.js')) await import('./' + f);
console.log('ok');
`;

const NODE_REPO: Record<string, string> = {
  'package.json': JSON.stringify({
    name: 'built',
    private: true,
    type: 'module',
    scripts: { test: 'node build.js && node test/run.js' },
  }),
  '.gitignore': 'dist/\n*.tsbuildinfo\n',
  'build.js': BUILD_JS,
  'src/limit.js': 'export const limit = 10;\n',
  'test/run.js': RUN_JS,
  'test/secret_case.test.js': `// ${HELD_OUT_MARKER}\nimport { limit } from '../src/limit.js';\nif (limit !== 12) process.exit(3);\n`,
  'node_modules/dep/index.js': 'export default 1;\n',
  'node_modules/dep/package.json': '{"name":"dep","type":"module"}\n',
  // Tracked, although its folder's name is ignored by .gitignore.
  'dist/README.md': 'The build goes here.\n',
};

const PYTEST_SH = `set -e
mkdir -p .pytest_cache/v/cache src/__pycache__ tests/__pycache__
printf '{}' > .pytest_cache/v/cache/lastfailed
printf 'Signature: 8a477f597d28d172789f06886806bc55' > .pytest_cache/CACHEDIR.TAG
printf 'o\\r\\r\\n\\0\\0\\0\\0binary' > src/__pycache__/app.cpython-312.pyc
printf 'o\\r\\r\\n\\0\\0\\0\\0binary' > tests/__pycache__/test_app.cpython-312-pytest-8.3.pyc
grep -q 'LIMIT = 12' src/app.py || { echo 'FAILED tests/test_app.py::test_limit - assert 10 == 12'; exit 1; }
echo '1 passed'
`;

const PYTHON_REPO: Record<string, string> = {
  'pyproject.toml': '[project]\nname = "app"\n',
  'src/app.py': 'LIMIT = 10\n',
  'tests/test_app.py': 'from app import LIMIT\n\ndef test_limit():\n    assert LIMIT == 12\n',
  'run-tests.sh': PYTEST_SH,
};

async function fixture(files: Record<string, string>, agent: string[]) {
  const root = await mkdtemp(join(tmpdir(), 'sandbox-harness-test-output-'));
  roots.push(root);
  const repo = join(root, 'repo');
  await writeTree(repo, files);
  const catalog = join(root, 'svc.yaml');
  await writeFile(
    catalog,
    [
      'name: svc',
      'owner: tests',
      'repo: repo',
      'rules: {}',
      'agent:',
      ...agent.map((l) => `  ${l}`),
      '',
    ].join('\n'),
  );
  return { root, repo, catalog };
}

async function fix(
  files: Record<string, string>,
  agent: string[],
  turns: Turn[],
  apply = true,
): Promise<{ result: Awaited<ReturnType<typeof runFix>>; repo: string; toolResults: string }> {
  const { root, repo, catalog } = await fixture(files, agent);
  const provider = scripted(turns);
  const result = await runFix(
    {
      ticket: 'Make the limit 12.',
      catalogFile: catalog,
      keep: 'never',
      apply,
      force: false,
      rebuild: false,
      cwd: root,
      env: {},
      signal: new AbortController().signal,
      readStdin: async () => '',
      provider: 'replay',
    },
    fixDeps(await sandboxProvider(), { createProvider: async () => provider }),
  );
  runIds.push(result.runId);
  const toolResults = provider.requests.map((r) => JSON.stringify(r.messages.at(-1))).join('\n');
  return { result, repo, toolResults };
}

const run = (id: string, command: string) => toolUse(id, 'run_command', { command });
const exists = (path: string) =>
  stat(path).then(
    () => true,
    () => false,
  );

describe("what tests leave behind is not the agent's change (real Docker)", () => {
  beforeAll(async () => {
    await requireDocker();
    await ensureBaseImage('node', {});
  }, 900_000);

  afterAll(async () => {
    for (const id of runIds) {
      for (const c of await dockerEngine().containers.list({ [LABEL.run]: id }))
        await dockerEngine().containers.remove(c.id);
    }
    await Promise.all(roots.map((r) => rm(r, { recursive: true, force: true })));
  });

  it("a tsc-style build into a gitignored dist/ and the loaders' caches: ready-for-review, nothing of it on the host; git works and holds no held-out test", async () => {
    const { result, repo, toolResults } = await fix(
      NODE_REPO,
      [
        'editableFiles: ["src/**"]',
        'testCommand: npm test',
        'heldOutTests: ["test/secret_case.test.js"]',
        'maxAttempts: 1',
        'maxTurns: 8',
      ],
      [
        {
          content: [toolUse('a', 'edit_file', { path: 'src/limit.js', search: '= 10', replacement: '= 12' })],
        },
        { content: [run('b', 'npm test')] },
        { content: [run('c', 'git status --short; echo ---; git diff')] },
        {
          content: [
            run(
              'd',
              'ls test; git log -p --all | cat; git cat-file --batch-all-objects --batch | cat; grep -rc HELDOUT .git | grep -v ":0" || echo none-in-git',
            ),
          ],
        },
        { content: [text('Done: the limit is 12.')] },
      ],
    );
    expect(result.outcome, result.record.message).toBe('ready-for-review');
    const attempt = result.record.attempts[0]!;
    expect(attempt.changedFiles).toEqual(['src/limit.js']);
    expect(attempt.ignoredCount).toBeGreaterThanOrEqual(80);
    expect(attempt.ignoredFiles).toEqual(
      expect.arrayContaining([
        'dist/esm/m0.js',
        'dist/index.d.ts',
        'tsconfig.tsbuildinfo',
        'node_modules/.cache/esm/loader.json',
        'node_modules/dep/node_modules/.cache/x.json',
        'coverage/lcov.info',
        '.git',
      ]),
    );
    expect(result.record.workspaceGit).toMatchObject({ state: 'created' });
    // The agent's git: its edit, and nothing of the build.
    expect(toolResults).toContain(' M src/limit.js');
    expect(toolResults).toContain('+export const limit = 12;');
    expect(toolResults).not.toMatch(/\?\? (dist|node_modules|coverage|tsconfig)/);
    // The held-out test is in no object, no log, no listing of the attempt sandbox.
    expect(toolResults).toContain('none-in-git');
    expect(toolResults).not.toContain(HELD_OUT_MARKER);
    expect(toolResults).not.toContain('secret_case');
    // It was there when the change was verified.
    expect(result.record.heldOutTests).toEqual(['test/secret_case.test.js']);
    expect(attempt.heldOut).toBe('passed');
    // The host got the fix and nothing else.
    expect(await readFile(join(repo, 'src/limit.js'), 'utf8')).toBe('export const limit = 12;\n');
    for (const left of [
      'dist/esm',
      'dist/index.d.ts',
      'tsconfig.tsbuildinfo',
      'node_modules/.cache',
      'coverage',
      '.git',
    ])
      expect([left, await exists(join(repo, left))]).toEqual([left, false]);
    expect(await readFile(join(repo, 'dist/README.md'), 'utf8')).toBe('The build goes here.\n');
  }, 240_000);

  it('a change to a tracked file under an ignored-looking path is still gated', async () => {
    const { result, repo } = await fix(
      NODE_REPO,
      ['editableFiles: ["src/**"]', 'testCommand: npm test', 'maxAttempts: 1', 'maxTurns: 5'],
      [
        {
          content: [toolUse('a', 'edit_file', { path: 'src/limit.js', search: '= 10', replacement: '= 12' })],
        },
        { content: [run('b', 'npm test && echo "edited" >> dist/README.md')] },
        { content: [text('done')] },
      ],
    );
    expect(result.outcome).toBe('rejected');
    const offences = result.record.attempts[0]?.gate?.offences ?? [];
    expect(offences.map((o) => o.path)).toEqual(['dist/README.md']);
    expect(await readFile(join(repo, 'src/limit.js'), 'utf8')).toBe('export const limit = 10;\n');
  }, 240_000);

  it("pytest's .pytest_cache and __pycache__ (simulated by a shell test command): ready-for-review", async () => {
    const { result, repo } = await fix(
      PYTHON_REPO,
      ['editableFiles: ["src/**"]', 'testCommand: sh run-tests.sh', 'maxAttempts: 1', 'maxTurns: 5'],
      [
        { content: [toolUse('a', 'edit_file', { path: 'src/app.py', search: '= 10', replacement: '= 12' })] },
        { content: [run('b', 'sh run-tests.sh && git status --short')] },
        { content: [text('done')] },
      ],
    );
    expect(result.outcome, result.record.message).toBe('ready-for-review');
    const attempt = result.record.attempts[0]!;
    expect(attempt.changedFiles).toEqual(['src/app.py']);
    expect(attempt.ignoredFiles).toEqual(
      expect.arrayContaining([
        '.pytest_cache/v/cache/lastfailed',
        'src/__pycache__/app.cpython-312.pyc',
        'tests/__pycache__/test_app.cpython-312-pytest-8.3.pyc',
      ]),
    );
    expect(await readFile(join(repo, 'src/app.py'), 'utf8')).toBe('LIMIT = 12\n');
    expect(await exists(join(repo, '.pytest_cache'))).toBe(false);
    expect(await exists(join(repo, 'src/__pycache__'))).toBe(false);
  }, 240_000);

  it('an image without git gets no repository, with a note, and the run goes on', async () => {
    const { repo } = await fixture(
      {
        ...PYTHON_REPO,
        'Dockerfile.sandbox': [
          'ARG BASE_IMAGE=sandbox-harness/base-node:20',
          'FROM ${BASE_IMAGE}',
          'USER root',
          'RUN rm -f /usr/bin/git',
          'COPY --chown=1000:1000 . /workspace',
          'USER sandbox',
          'WORKDIR /workspace',
          '',
        ].join('\n'),
      },
      ['editableFiles: ["src/**"]', 'testCommand: sh run-tests.sh'],
    );
    const image = await buildRepoImage({ repoDir: repo });
    const git = await dockerBackend().workspaceGitImage(image.tag, { hidden: [], exclude: [] });
    expect(git).toMatchObject({ state: 'no-git', note: expect.stringMatching(/has no git/) });
  }, 240_000);
});
