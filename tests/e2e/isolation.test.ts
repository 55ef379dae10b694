/**
 * Isolation as a user meets it through the CLI, on real Docker: text from a sandbox never
 * reaches the terminal raw, and commands act only on containers a validated run record of
 * this tool names.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { prepareExampleCopy, type ExampleCopy } from '../../src/demo.js';
import { dockerEngine } from '../../src/sandbox/docker/engine/index.js';
import { LABEL } from '../../src/sandbox/docker/labels.js';
import { ensureBaseImage } from '../../src/sandbox/docker/images/ensure-base.js';
import { DEFAULT_BASE_IMAGE } from '../../src/sandbox/docker/images/base-images.js';
import { runCli, ROOT } from '../helpers/cli.js';
import { foreignContainer } from '../helpers/docker.js';

const runIds: string[] = [];
let copy: ExampleCopy;

beforeAll(async () => {
  await dockerEngine().ping(5000);
  await ensureBaseImage('node', {});
  copy = await prepareExampleCopy();
}, 900_000);

afterAll(async () => {
  for (const id of runIds) {
    for (const c of await dockerEngine().containers.list({ [LABEL.run]: id }))
      await dockerEngine().containers.remove(c.id);
  }
  if (copy) await rm(dirname(copy.root), { recursive: true, force: true });
});

describe('text from a sandbox on the terminal', () => {
  it('escape sequences in a patch and in model text are shown escaped; --json keeps them exact', async () => {
    const cassette = join(ROOT, 'tests/e2e/cassettes/escape-sequences.json');
    const r = await runCli(
      ['fix', 'OPS-412', '--catalog', copy.catalog, '--cassette', cassette, '--no-apply'],
      {
        cwd: copy.root,
      },
    );
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).not.toContain('\u001b');
    expect(r.stdout).not.toContain('\u0007');
    expect(r.stdout).toContain('\\e]52;c;ZWNobyBwd25lZA==\\x07\\e[2K\\e[1A hidden');
    expect(r.stderr).not.toContain('\u001b]52');
    const runDir = /run record: (\S+)/.exec(r.stdout)?.[1];
    expect(runDir).toBeDefined();
    // The record keeps the bytes exactly; only the terminal view is escaped.
    const patch = await readFile(join(copy.root, runDir!, 'patch.diff'), 'utf8');
    expect(patch).toContain('\u001b]52;c;ZWNobyBwd25lZA==\u0007');
    const inspect = await runCli(['inspect', 'last', '--catalog', copy.catalog], { cwd: copy.root });
    expect(inspect.stdout).not.toContain('\u001b');
    expect(inspect.stdout).toContain('\\e]52');
    const json = await runCli(['inspect', 'last', '--catalog', copy.catalog, '--json'], { cwd: copy.root });
    expect(JSON.parse(json.stdout).patch).toContain('\u001b]52;c;');
  });
});

describe('run records are data, not instructions', () => {
  async function forge(id: string, mutate: (record: Record<string, unknown>) => void): Promise<string> {
    const runsDir = join(copy.repo, '.sandbox-harness', 'runs');
    const real = (await runCli(['runs', '--catalog', copy.catalog, '--json'], { cwd: copy.root })).stdout;
    const source = (JSON.parse(real) as { id: string; dir: string }[])[0]!;
    const record = JSON.parse(await readFile(join(source.dir, 'run.json'), 'utf8')) as Record<
      string,
      unknown
    >;
    record.id = id;
    mutate(record);
    await mkdir(join(runsDir, id), { recursive: true });
    await writeFile(join(runsDir, id, 'run.json'), JSON.stringify(record));
    return id;
  }

  it('rerun-tests and shell refuse a container that is not a sandbox of that run, and leave it alone', async () => {
    // A container of someone else's, running: a forged record names it as its kept sandbox.
    const foreign = await foreignContainer(DEFAULT_BASE_IMAGE, { start: true });
    try {
      const id = await forge('20990101-000000-f0f0f0', (record) => {
        record.containers = [{ role: 'attempt-1', id: foreign, kept: true }];
      });
      for (const command of ['rerun-tests', 'shell']) {
        const r = await runCli([command, id, '--catalog', copy.catalog], { cwd: copy.root });
        expect(r.code, `${command}: ${r.stderr}`).toBe(2);
        expect(r.stderr).toMatch(/is not a sandbox of run 20990101-000000-f0f0f0; refusing to use it/);
      }
      expect((await dockerEngine().containers.inspect(foreign))?.running).toBe(true);
    } finally {
      await dockerEngine().containers.remove(foreign);
    }
  });

  it('a run.json that is not a record of this tool is refused by name, not acted on', async () => {
    const id = await forge('20990101-000000-a1a1a1', (record) => {
      record.containers = [{ role: 'attempt-1', id: '../../etc/passwd', kept: true }];
    });
    const r = await runCli(['rerun-tests', id, '--catalog', copy.catalog], { cwd: copy.root });
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/has an invalid record: containers\.0\.id/);
  });
});
