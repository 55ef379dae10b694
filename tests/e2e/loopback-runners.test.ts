/**
 * Real test runners in a sandbox with no network: vitest 1, 2, 3 and 4, jest, mocha and
 * node:test each run a test that starts an HTTP server on `localhost`, `127.0.0.1` and
 * `::1` and calls it, through `sandbox-harness exec --repo` (the built CLI, real Docker).
 * vitest before 4 could not even start there once (`getaddrinfo EAI_AGAIN localhost`).
 * Then a `fix` of the vitest 2 project: the baseline and the verification run the same
 * tests, and the replayed agent rewrites two executable files with write_file and
 * edit_file: the patch carries no mode change, the gate passes, the host files stay 0755.
 *
 * The projects are small files written here; their node_modules are installed on the host
 * from the npm registry (never from a sandbox), once per dependency set, cached under the
 * system's temp folder across runs, all projects at once.
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { chmod, mkdir, mkdtemp, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBaseImage } from '../../src/sandbox/docker/images/ensure-base.js';
import { dockerEngine } from '../../src/sandbox/docker/engine/index.js';
import { cleanEnv, runCli } from '../helpers/cli.js';

const run = promisify(execFile);

interface Project {
  /** Folder in the repo. */
  name: string;
  dependencies: Record<string, string>;
  /** Run in the project's folder, inside the sandbox. */
  command: string;
  /** The project's own files besides package.json and the shared server helper. */
  files: Record<string, string>;
  type?: 'module' | 'commonjs';
}

/** Starts a server on `host`, calls it through `host`, and says what came back (CommonJS). */
const LOOPBACK_HELPER = `const http = require('node:http');

function get(url) {
  return new Promise((resolve, reject) => {
    http
      .get(url, (res) => {
        let body = '';
        res.on('data', (chunk) => (body += chunk));
        res.on('end', () => resolve(body));
      })
      .on('error', reject);
  });
}

async function roundTrip(host, answer = () => 'pong') {
  const server = http.createServer((req, res) => res.end(answer() + ' via ' + host));
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, host, resolve);
  });
  const { port } = server.address();
  try {
    return await get('http://' + (host.includes(':') ? '[' + host + ']' : host) + ':' + port + '/');
  } finally {
    server.close();
  }
}

module.exports = { roundTrip };
`;

const HOSTS = ['localhost', '127.0.0.1', '::1'];

/** One test per host, in the spelling each runner wants. */
function loopbackTests(style: 'vitest' | 'jest' | 'mocha' | 'node'): string {
  const header = {
    vitest:
      "import { it, expect } from 'vitest';\nimport { createRequire } from 'node:module';\nconst { roundTrip } = createRequire(import.meta.url)('./loopback.cjs');\nconst equal = (a, b) => expect(a).toBe(b);\n",
    jest: "const { roundTrip } = require('./loopback.cjs');\nconst equal = (a, b) => expect(a).toBe(b);\n",
    mocha:
      "const assert = require('node:assert');\nconst { roundTrip } = require('./loopback.cjs');\nconst equal = (a, b) => assert.strictEqual(a, b);\n",
    node: "const { it } = require('node:test');\nconst assert = require('node:assert');\nconst { roundTrip } = require('./loopback.cjs');\nconst equal = (a, b) => assert.strictEqual(a, b);\n",
  }[style];
  const cases = HOSTS.map(
    (host) =>
      `it('serves and calls HTTP on ${host}', async () => {\n  equal(await roundTrip('${host}'), 'pong via ${host}');\n});\n`,
  ).join('');
  return header + cases;
}

const vitestProject = (name: string, dependencies: Record<string, string>): Project => ({
  name,
  dependencies,
  type: 'module',
  command: 'npx vitest run',
  files: { 'loopback.test.js': loopbackTests('vitest') },
});

const PROJECTS: Project[] = [
  vitestProject('vitest1', { vitest: '1.6.1' }),
  vitestProject('vitest2', { vitest: '2.1.9' }),
  vitestProject('vitest3', { vitest: '3.2.7' }),
  vitestProject('vitest4', { vitest: '4.1.12', vite: '8.3.8' }),
  {
    name: 'jest',
    dependencies: { jest: '29.7.0' },
    command: 'npx jest --ci',
    files: { 'loopback.test.js': loopbackTests('jest') },
  },
  {
    name: 'mocha',
    dependencies: { mocha: '10.8.2' },
    command: 'npx mocha',
    files: { 'loopback.test.js': loopbackTests('mocha') },
  },
  {
    name: 'node-test',
    dependencies: {},
    command: 'node --test',
    files: { 'loopback.test.js': loopbackTests('node') },
  },
];

/** The vitest 2 project's ticket: a greeting served on localhost is wrong in two executable files. */
const GREETER = {
  'src/greet.js': "#!/usr/bin/env node\nexport const greet = (name) => 'Helo, ' + name;\n",
  'src/banner.js': "#!/usr/bin/env node\nexport const banner = () => '== greeter ==';\n",
  'greet.test.js': `import { it, expect } from 'vitest';
import { createRequire } from 'node:module';
import { greet } from './src/greet.js';
import { banner } from './src/banner.js';
const { roundTrip } = createRequire(import.meta.url)('./loopback.cjs');

it('greets over HTTP on localhost, 127.0.0.1 and ::1', async () => {
  for (const host of ['localhost', '127.0.0.1', '::1']) {
    expect(await roundTrip(host, () => greet('sandbox'))).toBe('Hello, sandbox via ' + host);
  }
});

it('has a banner', () => {
  expect(banner()).toMatch(/greeter/);
});
`,
};

const CACHE = join(tmpdir(), 'sandbox-harness-test-npm');

/**
 * node_modules for one dependency set, installed on the host from the npm registry once and
 * kept under the temp folder (a finished install is renamed into place: a crash or a
 * concurrent run never leaves a half-installed one under the key).
 */
async function installed(dependencies: Record<string, string>): Promise<string | undefined> {
  if (Object.keys(dependencies).length === 0) return undefined;
  const key = createHash('sha256').update(JSON.stringify(dependencies)).digest('hex').slice(0, 16);
  const done = join(CACHE, key);
  if (existsSync(join(done, 'node_modules'))) return join(done, 'node_modules');
  await mkdir(CACHE, { recursive: true });
  const work = await mkdtemp(join(CACHE, `.${key}-`));
  await writeFile(
    join(work, 'package.json'),
    JSON.stringify({ name: 'deps', private: true, dependencies }, null, 2),
  );
  await run(
    'npm',
    ['install', '--no-audit', '--no-fund', '--ignore-scripts', '--no-package-lock', '--loglevel=error'],
    { cwd: work, maxBuffer: 16 * 1024 * 1024 },
  );
  await rename(work, done).catch(async (error: NodeJS.ErrnoException) => {
    // Another run finished the same install first: theirs is as good.
    if (!existsSync(join(done, 'node_modules'))) throw error;
    await rm(work, { recursive: true, force: true });
  });
  return join(done, 'node_modules');
}

/** Writes the repo of all projects; node_modules are hard-linked copies of the cached installs. */
async function writeRepo(repo: string): Promise<void> {
  const modules = await Promise.all(PROJECTS.map((p) => installed(p.dependencies)));
  await Promise.all(
    PROJECTS.map(async (project, index) => {
      const dir = join(repo, project.name);
      await mkdir(dir, { recursive: true });
      const pkg = {
        name: project.name,
        private: true,
        ...(project.type ? { type: project.type } : {}),
        dependencies: project.dependencies,
      };
      await writeFile(join(dir, 'package.json'), `${JSON.stringify(pkg, null, 2)}\n`);
      await writeFile(join(dir, 'loopback.cjs'), LOOPBACK_HELPER);
      for (const [path, content] of Object.entries(project.files)) {
        await writeFile(join(dir, path), content);
      }
      const from = modules[index];
      if (from) await run('cp', ['-al', from, join(dir, 'node_modules')]);
    }),
  );
  // The greeter lives in the vitest 2 project; its sources are executable, as in many repos.
  const greeter = join(repo, 'vitest2');
  await mkdir(join(greeter, 'src'), { recursive: true });
  for (const [path, content] of Object.entries(GREETER)) await writeFile(join(greeter, path), content);
  await chmod(join(greeter, 'src', 'greet.js'), 0o755);
  await chmod(join(greeter, 'src', 'banner.js'), 0o755);
}

interface ExecJson {
  exitCode: number;
  stdout: string;
  stderr: string;
  timedOut: boolean;
}

const ENV = cleanEnv();
let root = '';
let repo = '';
const runIds: string[] = [];
let built: Promise<string> | undefined;

/** The repo's sandbox image, built (or found by its content hash) by `exec --repo` once. */
function image(): Promise<string> {
  built ??= (async () => {
    const r = await runCli(['exec', '--repo', repo, '--json', '--', 'true'], { env: ENV });
    if (r.code !== 0) throw new Error(`exec --repo failed (exit ${r.code}):\n${r.stdout}\n${r.stderr}`);
    return (JSON.parse(r.stdout) as { image: string }).image;
  })();
  return built;
}

describe('test runners with localhost in a sandbox (real Docker, built CLI)', { timeout: 240_000 }, () => {
  beforeAll(async () => {
    await dockerEngine().ping(5000);
    root = await mkdtemp(join(tmpdir(), 'sandbox-harness-loopback-'));
    repo = join(root, 'loopback-runners');
    await Promise.all([ensureBaseImage('node', {}), writeRepo(repo)]);
    await image();
  }, 600_000);

  afterAll(async () => {
    for (const id of runIds) await runCli(['gc', '--run', id, '--json'], { env: ENV });
    if (root) await rm(root, { recursive: true, force: true });
  });

  /** `exec` of one command line in a sandbox, by the CLI; `--repo` or an image it built. */
  async function exec(where: string[], line: string): Promise<ExecJson & { output: string }> {
    const r = await runCli(['exec', ...where, '--json', '--timeout', '120', '--', line], { env: ENV });
    let json: ExecJson & { image: string };
    try {
      json = JSON.parse(r.stdout) as typeof json;
    } catch {
      throw new Error(`exec did not print JSON (exit ${r.code}):\n${r.stdout}\n${r.stderr}`);
    }
    // eslint-disable-next-line no-control-regex
    const output = `${json.stdout}\n${json.stderr}`.replace(/\x1b\[[0-9;]*m/g, '');
    return { ...json, output };
  }

  // The image of all projects is built once, by an exec of the repo; the runners then run
  // at once, vitest 2 (the case) by `--repo` as a user would, the others on that image.
  it.concurrent.each(PROJECTS.map((p) => [p.name, p] as const))(
    '%s: a test server on localhost, 127.0.0.1 and ::1 passes in a sandbox',
    async (name, project) => {
      const where = name === 'vitest2' ? ['--repo', repo] : ['--image', await image()];
      const result = await exec(where, `cd ${project.name} && ${project.command} loopback.test.js`);
      expect(result.output).not.toMatch(/EAI_AGAIN|ENOTFOUND|EADDRNOTAVAIL/);
      expect(result.exitCode, result.output).toBe(0);
      // The runner really ran the three tests (a runner that found none can exit 0 too).
      expect(result.output).toMatch(/\b3 pass(ed|ing)\b|\bpass 3\b/);
    },
  );

  it('fix: baseline and verification run the localhost tests; write_file and edit_file keep 0755', async () => {
    const ticket = join(root, 'GREET-1.md');
    await writeFile(
      ticket,
      '---\nid: GREET-1\ntitle: The greeting is misspelled\n---\nThe service answers "Helo, sandbox"; it must say "Hello, sandbox". The banner should name the service.\n',
    );
    const catalog = join(root, 'greeter.yaml');
    await writeFile(
      catalog,
      [
        'name: greeter',
        'owner: team-test',
        'description: Greets over HTTP.',
        'repo: loopback-runners',
        'rules: {}',
        'agent:',
        '  editableFiles:',
        '    - vitest2/src/greet.js',
        '    - vitest2/src/banner.js',
        '  testCommand: cd vitest2 && npx vitest run greet.test.js',
        '  maxAttempts: 1',
        '  maxTurns: 5',
        '',
      ].join('\n'),
    );
    const cassette = join(root, 'greet.json');
    const turn = (id: string, name: string, input: unknown) => ({
      content: [{ type: 'tool_use', id, name, input }],
      stopReason: 'tool_use',
    });
    await writeFile(
      cassette,
      JSON.stringify({
        version: 1,
        model: 'recorded: fixes two executable files with write_file and edit_file',
        turns: [
          turn('t1', 'edit_file', {
            path: 'vitest2/src/greet.js',
            search: "'Helo, '",
            replacement: "'Hello, '",
          }),
          turn('t2', 'write_file', {
            path: 'vitest2/src/banner.js',
            content: "#!/usr/bin/env node\nexport const banner = () => '== greeter service ==';\n",
          }),
          { content: [{ type: 'text', text: 'Fixed the greeting and the banner.' }], stopReason: 'end_turn' },
        ],
      }),
    );
    const r = await runCli(['fix', ticket, '--catalog', catalog, '--cassette', cassette, '--json'], {
      cwd: root,
      env: ENV,
    });
    let json: { runId: string; runDir: string; outcome: string };
    try {
      json = JSON.parse(r.stdout) as typeof json;
    } catch {
      throw new Error(`fix did not print JSON (exit ${r.code}):\n${r.stdout}\n${r.stderr}`);
    }
    runIds.push(json.runId);
    const record = JSON.parse(await readFile(join(json.runDir, 'run.json'), 'utf8'));
    const baseline = await readFile(join(json.runDir, 'baseline-test-output.txt'), 'utf8');
    // The baseline failed on the assertion, not because the runner could not start.
    expect(baseline).not.toMatch(/EAI_AGAIN|ENOTFOUND|EADDRNOTAVAIL/);
    expect(baseline).toMatch(/Helo, sandbox via localhost/);
    expect(record.baseline.failing).toBe(true);
    expect(json.outcome, `${r.stderr}\n${JSON.stringify(record.attempts)}`).toBe('ready-for-review');
    expect(r.code).toBe(0);
    const verification = await readFile(join(json.runDir, 'attempts', '1', 'test-output.txt'), 'utf8');
    expect(verification).toMatch(/2 passed/);
    const patch = await readFile(join(json.runDir, 'patch.diff'), 'utf8');
    expect(patch).toContain("+export const greet = (name) => 'Hello, ' + name;");
    expect(patch).toContain('== greeter service ==');
    expect(patch).not.toMatch(/old mode|new mode|new file mode/);
    for (const file of ['greet.js', 'banner.js']) {
      expect((await stat(join(repo, 'vitest2', 'src', file))).mode & 0o777).toBe(0o755);
    }
    expect(await readFile(join(repo, 'vitest2', 'src', 'greet.js'), 'utf8')).toContain("'Hello, '");
  });
});
