/**
 * `fix` end to end (built CLI, real Docker, replayed model) on a repo whose AGENTS.md is a
 * symlink to a host file: the run stops with an error naming the link, and the host file's
 * content reaches neither the model, nor the run record, nor the output.
 */
import { readdir, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { prepareExampleCopy, type ExampleCopy } from '../../src/demo.js';
import { dockerEngine } from '../../src/sandbox/docker/engine/index.js';
import { ensureBaseImage } from '../../src/sandbox/docker/images/ensure-base.js';
import { runCli } from '../helpers/cli.js';
import { canaryToken } from '../helpers/fake-secrets.js';

async function filesUnder(dir: string): Promise<string[]> {
  const out: string[] = [];
  for (const entry of await readdir(dir, { withFileTypes: true }).catch(() => [])) {
    const full = join(dir, entry.name);
    if (entry.isDirectory()) out.push(...(await filesUnder(full)));
    else if (entry.isFile()) out.push(full);
  }
  return out;
}

describe('fix refuses to read through a repo symlink', () => {
  let copy: ExampleCopy;

  beforeAll(async () => {
    await dockerEngine().ping(5000);
    await ensureBaseImage('node', {});
    copy = await prepareExampleCopy();
  }, 900_000);

  afterAll(async () => {
    // Only this file's runs: `gc --older-than 0s` would remove every kept container on the engine.
    const runs = copy ? await readdir(join(copy.repo, '.sandbox-harness', 'runs')).catch(() => []) : [];
    for (const runId of runs) await runCli(['gc', '--run', runId]);
    if (copy) await rm(join(copy.root, '..'), { recursive: true, force: true });
  });

  it('an AGENTS.md that is a symlink to a host file ends the run as a configuration error, exit 2', async () => {
    // Outside the repo and the catalog folder, where a user's credentials would be.
    const hostFile = join(copy.root, '..', 'host-credentials');
    const canary = canaryToken();
    await writeFile(hostFile, `[default]\naws_secret_access_key = ${canary}\n`);
    await rm(join(copy.repo, 'AGENTS.md'));
    await symlink(hostFile, join(copy.repo, 'AGENTS.md'));

    const result = await runCli(
      ['fix', 'OPS-412', '--catalog', copy.catalog, '--cassette', join(copy.cassettes, 'OPS-412.json')],
      { cwd: copy.root },
    );

    expect(result.code).toBe(2);
    expect(`${result.stdout}\n${result.stderr}`).toContain(
      `AGENTS.md is a symlink to ${hostFile}, outside the repo`,
    );
    const everything = [result.stdout, result.stderr];
    for (const file of await filesUnder(join(copy.repo, '.sandbox-harness'))) {
      everything.push(await readFile(file, 'utf8'));
    }
    expect(everything.length).toBeGreaterThan(2); // a run record was written
    for (const text of everything) expect(text).not.toContain(canary);
  });
});
