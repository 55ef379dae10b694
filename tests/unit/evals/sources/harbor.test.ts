/**
 * Harbor task folders read as hostile input: task.toml problems at file:line with the field,
 * what was expected and what was there; folders and files that are links, too large or
 * missing refused by name; the network of each phase mapped (none, egress by name) or marked
 * (public internet is never given); settings the harness cannot honour refused.
 */
import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  harborTaskDirs,
  loadHarborTask,
  loadHarborTasks,
  locateToml,
  parseTaskToml,
} from '../../../../src/evals/sources/harbor.js';
import { mapTask, testCommand, oracleCassette } from '../../../../src/evals/sources/harbor-materialize.js';
import { ConfigError } from '../../../../src/errors.js';

function problems(text: string): string[] {
  const parsed = parseTaskToml(text, 't/task.toml');
  return 'problems' in parsed ? parsed.problems : [];
}

describe('task.toml validation', () => {
  it('accepts the documented example (with metadata of any shape)', () => {
    const parsed = parseTaskToml(
      'version = "1.0"\n[metadata]\nauthor_name = "A"\ntags = ["x"]\n[verifier]\ntimeout_sec = 120.0\n[agent]\ntimeout_sec = 120.0\n[environment]\nbuild_timeout_sec = 600.0\ncpus = 1\nmemory_mb = 2048\nstorage_mb = 10240\n',
      'task.toml',
    );
    expect(parsed).toMatchObject({ config: { verifier: { timeout_sec: 120 }, environment: { cpus: 1 } } });
  });

  it('names file:line, the field, what was expected and what was there', () => {
    expect(problems('version = "1.0"\n\n[verifier]\ntimeout_sec = "soon"\n')).toEqual([
      't/task.toml:4: verifier.timeout_sec: expected a number of seconds greater than 0, got "soon"',
    ]);
    expect(problems('[environment]\ncpus = 1\nmemory_mb = -5\n')).toEqual([
      't/task.toml:3: environment.memory_mb: expected a whole number of MB greater than 0, got -5',
    ]);
  });

  it('refuses unknown keys where they are written (a typo is not a silent default)', () => {
    expect(problems('[agent]\n\ntimout_sec = 10\n')).toEqual([
      expect.stringMatching(/^t\/task\.toml:3: agent\.timout_sec: unknown key "timout_sec"/),
    ]);
  });

  it('refuses what it cannot honour: GPUs, healthchecks (a step’s too), MCP servers, host variables', () => {
    const all = problems(
      '[environment]\ngpus = 1\nmcp_servers = [{ name = "x" }]\n[environment.env]\nTOKEN = "${HOST_TOKEN}"\n[environment.healthcheck]\ncommand = "true"\n[[steps]]\nname = "a"\n[steps.healthcheck]\ncommand = "true"\n',
    );
    expect(all.join('\n')).toMatch(/:2: environment\.gpus: GPUs are not available/);
    expect(all.join('\n')).toMatch(/environment\.mcp_servers: MCP servers are not supported/);
    expect(all.join('\n')).toMatch(
      /:5: environment\.env\.TOKEN: a \$\{VAR\} template would copy a host variable/,
    );
    expect(all.join('\n')).toMatch(
      /:6: environment\.healthcheck: \[environment\.healthcheck\] is not supported/,
    );
    expect(all.join('\n')).toMatch(/:8: steps\.0\.healthcheck: unknown key "healthcheck"/);
  });

  it('refuses TOML that does not parse, at its line and column, and deep nesting', () => {
    expect(problems('[verifier]\ntimeout_sec = = 3\n')[0]).toMatch(/^t\/task\.toml:2:\d+: not valid TOML/);
    const deep = `x = ${'['.repeat(50)}${']'.repeat(50)}\n`;
    expect(problems(deep)[0]).toMatch(/not valid TOML/);
  });

  it('locates dotted sections and keys', () => {
    const text = '[environment]\ncpus = 1\n\n[environment.env]\nA = "1"\n';
    expect(locateToml(text, ['environment', 'env', 'A'])).toBe(5);
    expect(locateToml(text, ['environment', 'cpus'])).toBe(2);
    expect(locateToml(text, ['nowhere'])).toBe(1);
  });
});

describe('task folders', () => {
  let root: string;
  beforeEach(async () => {
    root = await mkdtemp(join(tmpdir(), 'harbor-unit-'));
  });
  afterEach(() => rm(root, { recursive: true, force: true }));

  async function task(name: string, files: Record<string, string>): Promise<string> {
    const dir = join(root, name);
    for (const [rel, content] of Object.entries(files)) {
      await mkdir(join(dir, rel, '..'), { recursive: true });
      await writeFile(join(dir, rel), content);
    }
    return dir;
  }
  const good = {
    'task.toml': 'version = "1.0"\n',
    'instruction.md': 'Do it.\n',
    'environment/Dockerfile': 'FROM x\nWORKDIR /app\n',
    'tests/test.sh': 'echo 1 > /logs/verifier/reward.txt\n',
  };

  it('finds one task folder, or the task folders in a folder', async () => {
    const a = await task('a', good);
    await task('b', { ...good, 'solution/solve.sh': 'true\n' });
    await mkdir(join(root, 'cassettes'));
    expect(await harborTaskDirs(a)).toEqual([a]);
    expect(await harborTaskDirs(root)).toEqual([a, join(root, 'b')]);
    const [, b] = await loadHarborTasks([a, join(root, 'b')], root);
    expect(b).toMatchObject({ id: 'b', solutionDir: join(root, 'b', 'solution') });
  });

  it('refuses links, missing parts and oversized files by name, every problem at once', async () => {
    const dir = await task('bad', { 'instruction.md': '', 'environment/Dockerfile': 'FROM x\n' });
    await writeFile(join(root, 'elsewhere.toml'), 'version = "1.0"\n');
    await symlink(join(root, 'elsewhere.toml'), join(dir, 'task.toml'));
    const loaded = await loadHarborTask(dir, 'bad');
    expect('problems' in loaded && loaded.problems).toEqual([
      'bad/task.toml: a symlink; refused (task files are read without following links)',
      'bad/instruction.md: the instruction is empty',
      'bad/tests: missing (expected tests/test.sh)',
    ]);
    const big = await task('big', { ...good, 'instruction.md': 'x'.repeat(2 * 1024 * 1024) });
    const loadedBig = await loadHarborTask(big, 'big');
    expect('problems' in loadedBig && loadedBig.problems).toEqual([
      'big/instruction.md: larger than 1048576 bytes',
    ]);
    await expect(loadHarborTasks([dir, big], root)).rejects.toBeInstanceOf(ConfigError);
  });

  it('refuses a multi-container environment', async () => {
    const dir = await task('compose', { ...good, 'environment/docker-compose.yaml': 'services: {}\n' });
    const loaded = await loadHarborTask(dir, 'compose');
    expect('problems' in loaded && loaded.problems[0]).toMatch(
      /docker-compose\.yaml: multi-container environments are not supported/,
    );
  });
});

describe('the mapping', () => {
  const base = {
    id: 't',
    dir: '/t',
    display: 't',
    instruction: 'x',
    dockerfile: 'FROM x\n',
    testsDir: '/t/tests',
  };
  const map = (toml: string) => {
    const parsed = parseTaskToml(toml, 'task.toml');
    if (!('config' in parsed)) throw new Error(parsed.problems.join('\n'));
    return mapTask({ ...base, config: parsed.config });
  };

  it("marks Harbor's default (the internet allowed) and runs it with network none", () => {
    const m = map('version = "1.0"\n');
    expect(m.egress).toBeUndefined();
    expect(m.marks).toEqual([
      expect.stringMatching(
        /agent phase may use the internet under Harbor \(no network setting.*network none/,
      ),
      expect.stringMatching(/verifier phase/),
    ]);
    expect(m.problems).toEqual([]);
  });

  it('maps no-network to none and an allowlist to egress by name, per phase', () => {
    expect(map('[environment]\nallow_internet = false\n')).toEqual({ problems: [], marks: [] });
    expect(
      map(
        '[environment]\nnetwork_mode = "no-network"\n[agent]\nnetwork_mode = "allowlist"\nallowed_hosts = ["registry.npmjs.org"]\n',
      ),
    ).toMatchObject({
      problems: [],
      marks: [],
      egress: { allow: ['registry.npmjs.org'], phases: ['agent'] },
    });
    expect(map('[environment]\nallowed_hosts = ["pypi.org"]\n').egress).toEqual({
      allow: ['pypi.org'],
      phases: ['agent', 'baseline', 'verify'],
    });
  });

  it('refuses an allowlist of addresses, and different lists per phase', () => {
    expect(
      map('[agent]\nallowed_hosts = ["10.0.0.1"]\n[verifier]\nnetwork_mode = "no-network"\n').problems,
    ).toEqual([expect.stringMatching(/agent\.allowed_hosts: 10\.0\.0\.1: an address is never allowed/)]);
    expect(
      map('[agent]\nallowed_hosts = ["a.example"]\n[verifier]\nallowed_hosts = ["b.example"]\n').problems,
    ).toEqual([expect.stringMatching(/allowed_hosts differ/)]);
  });

  it('marks a root user (every sandbox runs as uid 1000)', () => {
    expect(map('[environment]\nallow_internet = false\n[verifier]\nuser = "root"\n').marks).toEqual([
      'verifier.user = "root": runs as the sandbox user (uid 1000), never root',
    ]);
  });

  it('quotes verifier and solution variables into the commands, never as code', () => {
    expect(testCommand({ A: "it's $(rm -rf /)" })).toContain(`export A='it'\\''s $(rm -rf /)'; `);
    const cassette = JSON.stringify(
      oracleCassette(
        't',
        [{ label: 't', files: [{ rel: 'solve.sh', content: Buffer.from('true') }] }],
        { B: '`x`' },
        60,
      ),
    );
    expect(cassette).toContain("export B='`x`'; bash /solution/solve.sh");
  });
});
