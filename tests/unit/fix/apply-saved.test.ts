/**
 * `sandbox-harness apply <run>`: a verified run's saved change goes to its repo later, with
 * the gate and the atomic apply of `fix`, refused when the repo changed since the run read it.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { cp, mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { runFix, type FixDeps, type FixOptions, type HostFile } from '../../../src/fix/run-fix.js';
import { applySavedRun } from '../../../src/fix/apply.js';
import { exitCodeForRun } from '../../../src/cli/exit-codes.js';
import { appliedCell } from '../../../src/cli/commands/runs.js';
import { sha256 } from '../../../src/changes/hash.js';
import { resolveRun } from '../../../src/runs/record.js';
import { SAVED_CHANGE_FILE, parseSavedChange } from '../../../src/changes/saved-change.js';
import { MemoryBackend, type ExecHandler } from '../../fakes/memory-sandbox.js';
import { scripted, text, toolUse, type Turn } from '../agent/helpers.js';
import { EXAMPLE_DIR } from '../../../src/demo.js';
import type { ModelProvider } from '../../../src/llm/types.js';

const fixingTurns: Turn[] = [
  {
    content: [
      toolUse('e1', 'edit_file', {
        path: 'src/shipping.ts',
        search: 'FREE_SHIPPING_THRESHOLD = 50;',
        replacement: 'FREE_SHIPPING_THRESHOLD = 39;',
      }),
    ],
  },
  { content: [text('fixed')] },
];

const npmTest: ExecHandler = (command, _options, sandbox) => {
  if (command !== 'npm test') return { exitCode: 0 };
  return (sandbox.text('src/shipping.ts') ?? '').includes('= 39;') ? { exitCode: 0 } : { exitCode: 1 };
};

const roots: string[] = [];
afterEach(async () => {
  await Promise.all(roots.splice(0).map((r) => rm(r, { recursive: true, force: true })));
});

async function listFiles(dir: string, base = dir): Promise<string[]> {
  const out: string[] = [];
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const full = join(dir, entry.name);
    if (entry.name === 'node_modules' || entry.name === '.sandbox-harness') continue;
    if (entry.isDirectory()) out.push(...(await listFiles(full, base)));
    else out.push(relative(base, full));
  }
  return out;
}

/** A verified run made with --no-apply on a copy of the example. */
async function verifiedRun(): Promise<{
  root: string;
  repo: string;
  runsDir: string;
  env: NodeJS.ProcessEnv;
}> {
  const root = await mkdtemp(join(tmpdir(), 'sandbox-harness-apply-'));
  roots.push(root);
  await cp(EXAMPLE_DIR, root, { recursive: true, filter: (s) => !s.includes('node_modules') });
  const repo = join(root, 'repo');
  const files: Record<string, Buffer> = {};
  const hostFiles = new Map<string, HostFile>();
  for (const path of await listFiles(repo)) {
    const content = await readFile(join(repo, path));
    files[path] = content;
    hostFiles.set(path, { sha256: sha256(content), mode: 0o644, type: 'file' });
  }
  const env = { HOME: '/root', XDG_STATE_HOME: join(root, 'state') };
  const deps = (provider: ModelProvider): FixDeps => ({
    backend: new MemoryBackend(files, npmTest),
    ping: async () => undefined,
    image: async () => ({ tag: 'memory:repo', imageId: 'sha256:memory', reused: true, hostFiles }),
    createProvider: async () => provider,
  });
  const options: FixOptions = {
    ticket: 'OPS-412',
    catalogFile: join(root, 'shipping-service.yaml'),
    keep: 'never',
    apply: false,
    force: false,
    rebuild: false,
    cwd: root,
    env,
    signal: new AbortController().signal,
    readStdin: async () => '',
    provider: 'replay',
  };
  const result = await runFix(options, deps(scripted(fixingTurns)));
  expect(result.outcome).toBe('ready-for-review');
  expect(result.record.applied).toBe(false);
  return { root, repo, runsDir: join(repo, '.sandbox-harness', 'runs'), env };
}

describe('apply <run>', () => {
  it('writes the saved change to the repo, marks the record applied, and refuses a second time', async () => {
    const { repo, runsDir, env } = await verifiedRun();
    const target = join(repo, 'src', 'shipping.ts');
    expect(await readFile(target, 'utf8')).toContain('= 50;');
    const stored = await resolveRun(runsDir, 'last');
    expect(appliedCell(stored.record)).toBe('no');
    const result = await applySavedRun(stored, { env });
    expect(result.outcome).toBe('ready-for-review');
    expect(exitCodeForRun(result)).toBe(0);
    expect(result.written).toEqual(['src/shipping.ts']);
    expect(await readFile(target, 'utf8')).toContain('FREE_SHIPPING_THRESHOLD = 39;');
    const after = await resolveRun(runsDir, 'last');
    expect(after.record.applied).toBe(true);
    expect(after.record.appliedAt).toBeDefined();
    expect(appliedCell(after.record)).toBe('yes (apply)');
    await expect(applySavedRun(after, { env })).rejects.toThrow(/already applied/);
  });

  it('refuses when a file it touches changed since the run read it: nothing written, not-applied, exit 4', async () => {
    const { repo, runsDir, env } = await verifiedRun();
    const target = join(repo, 'src', 'shipping.ts');
    await writeFile(target, '// edited by a person since\n');
    const result = await applySavedRun(await resolveRun(runsDir, 'last'), { env });
    expect(result.outcome).toBe('not-applied');
    expect(exitCodeForRun(result)).toBe(4);
    expect(result.problem).toMatch(/src\/shipping\.ts/);
    expect(await readFile(target, 'utf8')).toBe('// edited by a person since\n');
    const after = await resolveRun(runsDir, 'last');
    expect(after.record.applied).toBe(false);
    expect(after.record.applyError).toMatch(/src\/shipping\.ts/);
    expect(appliedCell(after.record)).toBe('no');
  });

  it('checks the change against the catalog as it is now: a path it no longer allows is refused', async () => {
    const { root, repo, runsDir, env } = await verifiedRun();
    const catalogFile = join(root, 'shipping-service.yaml');
    const yaml = await readFile(catalogFile, 'utf8');
    await writeFile(catalogFile, yaml.replace('    - src/shipping.ts', '    - src/other.ts'));
    expect(await readFile(catalogFile, 'utf8')).toContain('src/other.ts');
    await expect(applySavedRun(await resolveRun(runsDir, 'last'), { env })).rejects.toThrow(
      /no longer allows src\/shipping\.ts/,
    );
    expect(await readFile(join(repo, 'src', 'shipping.ts'), 'utf8')).toContain('= 50;');
  });

  it('refuses a saved change that was tampered with (content not matching its hash, a path out of the repo)', async () => {
    const { runsDir } = await verifiedRun();
    const stored = await resolveRun(runsDir, 'last');
    const text = await readFile(join(stored.dir, SAVED_CHANGE_FILE), 'utf8');
    const saved = JSON.parse(text) as { entries: Array<{ path: string; content: string }> };
    expect(saved.entries.map((e) => e.path)).toEqual(['src/shipping.ts']);
    const swapped = structuredClone(saved);
    swapped.entries[0]!.content = Buffer.from('evil').toString('base64');
    expect(parseSavedChange(JSON.stringify(swapped))).toEqual({
      problem: 'src/shipping.ts: content does not match its sha256',
    });
    const escaping = structuredClone(saved);
    escaping.entries[0]!.path = '../outside.ts';
    expect('problem' in parseSavedChange(JSON.stringify(escaping))).toBe(true);
  });

  it('refuses a run without a verified fix', async () => {
    const { runsDir, env } = await verifiedRun();
    const stored = await resolveRun(runsDir, 'last');
    await expect(
      applySavedRun({ ...stored, record: { ...stored.record, outcome: 'failed' } }, { env }),
    ).rejects.toThrow(/ended failed: it has no verified fix/);
  });
});
