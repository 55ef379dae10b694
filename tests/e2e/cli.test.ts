/** The small commands of the CLI, as a user runs them: help, validation, exec, gc, exit codes. */
import { describe, expect, it } from 'vitest';
import { writeFile, mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runCli, ROOT } from '../helpers/cli.js';
import { FIXTURES } from '../helpers/docker.js';
import { dockerEngine } from '../../src/sandbox/docker/engine.js';

describe('sandbox-harness CLI', () => {
  it('--help lists every command and the exit codes', async () => {
    const r = await runCli(['--help']);
    expect(r.code).toBe(0);
    for (const command of [
      'fix',
      'eval',
      'demo',
      'runs',
      'inspect',
      'logs',
      'shell',
      'rerun-tests',
      'gc',
      'catalog',
      'doctor',
      'setup',
      'images',
      'exec',
    ]) {
      expect(r.stdout).toMatch(new RegExp(`\\n  ${command}\\b`));
    }
    expect(r.stdout).toMatch(/130\s+interrupted/);
  });

  it('an unknown option is a usage error (exit 2)', async () => {
    const r = await runCli(['fix', 'OPS-412', '--no-such-flag']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/unknown option/);
  });

  it('catalog validate: 0 for a good catalog, 2 with file:line:col for a bad one', async () => {
    const good = await runCli([
      'catalog',
      'validate',
      join(ROOT, 'examples', 'shipping-service', 'shipping-service.yaml'),
    ]);
    expect(good.code).toBe(0);
    expect(good.stdout).toMatch(/^ok /);
    const dir = await mkdtemp(join(tmpdir(), 'sandbox-harness-cli-'));
    const bad = join(dir, 'bad.yaml');
    await writeFile(
      bad,
      'name: x\nowner: y\nrepo: .\nrules: {}\nagent:\n  editableFiles: [src/**]\n  testCommand: npm test\n  maxTurns: lots\n',
    );
    const r = await runCli(['catalog', 'validate', bad, '--json']);
    expect(r.code).toBe(2);
    const json = JSON.parse(r.stdout) as { ok: boolean; files: { problems: string[] }[] };
    expect(json.ok).toBe(false);
    expect(json.files[0]!.problems[0]).toMatch(/bad\.yaml:8:\d+ agent\.maxTurns: /);
  });

  it('exec runs one command in a fresh sandbox of a repo and removes it', async () => {
    const r = await runCli([
      'exec',
      '--repo',
      join(FIXTURES, 'repos', 'conformance'),
      '--json',
      '--',
      'cat src/greeting.txt; id -u',
    ]);
    expect(r.code, r.stderr).toBe(0);
    const json = JSON.parse(r.stdout) as { exitCode: number; stdout: string; container: string };
    expect(json.stdout).toBe('hello\n1000\n');
    expect(await dockerEngine().inspectContainer(json.container)).toBeUndefined();
    const gone = await runCli(['exec', '--image', 'sandbox-harness/no-such-image:x', '--', 'true']);
    expect(gone.code).toBe(3);
    expect(gone.stderr).toMatch(/does not exist/);
    expect(gone.stderr).toMatch(/hint:/);
  });

  it('gc refuses a malformed age (exit 2)', async () => {
    const r = await runCli(['gc', '--older-than', 'yesterday']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/expected a duration such as 30m, 24h or 7d, got "yesterday"/);
  });
});
