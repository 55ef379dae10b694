/**
 * Instructions that never harm the machine they run on: every recipe of the docs (a second
 * engine or service a page asks a user to start, marked `<!-- doc-test: recipe NAME -->`, with
 * its `recipe NAME teardown` blocks) runs as written, in a fresh copy of this checkout with
 * this checkout's `sandbox-harness` on the PATH; its teardown always runs. Then the main
 * engine must be exactly as it was: its daemon.json and /etc/docker, its default networks,
 * the host's docker0 (same interface, same addresses), and it must still start a container on
 * its default network (a second dockerd with `--bridge none` in the host's network namespace
 * deletes docker0, after which exactly that fails). Nothing the recipe started may be left
 * running, and a network namespace it added must be gone.
 *
 * Root only (the recipes are); recipes run one after the other. A page that adds a recipe is
 * run here with nothing to change in this file.
 */
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { chmod, cp, mkdir, mkdtemp, readdir, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dockerEngine } from '../../src/sandbox/docker/engine/index.js';
import { ensureBaseImage } from '../../src/sandbox/docker/images/ensure-base.js';
import { canaryEnv, expectNoCanaryIn } from '../helpers/canary.js';
import { ROOT } from '../helpers/cli.js';
import { harnessArgs, readDocPages, scanShell, simpleCommands, type DocBlock } from '../helpers/doc-pages.js';
import {
  copyCheckout,
  gcRunsUnder,
  groupMembers,
  killGroup,
  removeQuietly,
  runCommand,
  type Ran,
} from '../helpers/doc-runner.js';

const BASE = 'sandbox-harness/base-node:20';
const NO_MODEL = 'http://127.0.0.1:9';

interface Recipe {
  page: string;
  name: string;
  blocks: DocBlock[];
  teardown: DocBlock[];
}

const recipes: Recipe[] = [];
for (const page of await readDocPages(ROOT)) {
  for (const block of page.blocks) {
    if (!block.recipe) continue;
    let recipe = recipes.find((r) => r.page === page.path && r.name === block.recipe!.name);
    if (!recipe)
      recipes.push((recipe = { page: page.path, name: block.recipe.name, blocks: [], teardown: [] }));
    (block.recipe.teardown ? recipe.teardown : recipe.blocks).push(block);
  }
}

/** Values of a flag in the recipe's commands (`--pidfile X`, `--data-root=X`). */
function flagValues(recipe: Recipe, flag: string): string[] {
  const values: string[] = [];
  for (const block of [...recipe.blocks, ...recipe.teardown])
    for (const command of block.commands)
      for (const words of simpleCommands(scanShell(command.text).code))
        words.forEach((w, i) => {
          if (w === flag && words[i + 1]) values.push(words[i + 1]!);
          else if (w.startsWith(`${flag}=`)) values.push(w.slice(flag.length + 1));
        });
  return values;
}

/** Network namespaces the recipe adds (`ip netns add NAME`). */
function namespacesOf(recipe: Recipe): string[] {
  const names: string[] = [];
  for (const block of recipe.blocks)
    for (const command of block.commands)
      for (const words of simpleCommands(scanShell(command.text).code)) {
        const at = words.findIndex((w, i) => w === 'netns' && words[i + 1] === 'add');
        if (words[0] === 'ip' && at > 0 && words[at + 2]) names.push(words[at + 2]!);
      }
  return names;
}

const usesHarness = (recipe: Recipe): boolean =>
  recipe.blocks.some((b) =>
    b.commands.some((c) => simpleCommands(scanShell(c.text).code).some((w) => harnessArgs(w))),
  );

const sha = (text: string): string => createHash('sha256').update(text).digest('hex');

/** What must not change on the main engine and the host. */
async function mainEngineState(env: NodeJS.ProcessEnv): Promise<Record<string, unknown>> {
  const daemonJson = await readFile('/etc/docker/daemon.json', 'utf8').then(sha, () => 'absent');
  const etcDocker = (await readdir('/etc/docker').catch(() => [] as string[])).sort();
  const defaults = await runCommand(
    ROOT,
    `docker network inspect bridge host none --format '{{.Name}} {{.Id}} {{.Driver}} {{json .IPAM.Config}} {{json .Options}}'`,
    env,
  );
  // Every other network of the main engine but the ones this tool's runs make and take away
  // (egress networks, labelled), which other tests may add and remove meanwhile.
  const others = await runCommand(
    ROOT,
    `docker network ls --no-trunc --format '{{.ID}} {{.Name}} {{.Driver}} {{.Labels}}'`,
    env,
  );
  const docker0 = await runCommand(ROOT, 'ip -j addr show docker0', env);
  const link = (
    JSON.parse(docker0.stdout || '[]') as { ifindex?: number; address?: string; addr_info?: unknown[] }[]
  )[0];
  const info = await runCommand(
    ROOT,
    `docker info --format '{{.ID}} {{json .Runtimes}} {{.DockerRootDir}}'`,
    env,
  );
  return {
    daemonJson,
    etcDocker,
    defaultNetworks:
      defaults.code === 0 ? defaults.stdout.trim().split('\n').sort() : `failed: ${defaults.stderr}`,
    networks:
      others.code === 0
        ? others.stdout
            .trim()
            .split('\n')
            .filter((line) => !line.includes('sandbox-harness.'))
            .sort()
        : `failed: ${others.stderr}`,
    docker0: link ? { ifindex: link.ifindex, address: link.address, addresses: link.addr_info } : 'missing',
    engine: info.stdout.trim(),
  };
}

/** The main engine starts a container on its default network (docker0) and runs it. */
async function defaultNetworkRun(env: NodeJS.ProcessEnv): Promise<Ran> {
  return runCommand(
    ROOT,
    `docker run --rm --network bridge --label sandbox-harness.test=docs-recipes ${BASE} true`,
    env,
    { timeoutMs: 120_000 },
  );
}

describe('every recipe of the docs leaves the main engine as it was', () => {
  let scratch: string;
  let copy: string;
  let env: NodeJS.ProcessEnv;
  let canary: string;

  beforeAll(async () => {
    if (process.getuid?.() !== 0)
      throw new Error('the docs recipes run as root (they start engines and services)');
    await dockerEngine().ping(5000);
    await ensureBaseImage('node', {});
    scratch = await mkdtemp(join(tmpdir(), 'sandbox-harness-recipes-'));
    copy = join(scratch, 'checkout');
    await copyCheckout(ROOT, copy);
    // The examples' own dependencies (image builds have no network), as the set-up leaves them.
    const example = 'examples/shipping-service/repo/node_modules';
    if (existsSync(join(ROOT, example)))
      await cp(join(ROOT, example), join(copy, example), { recursive: true, verbatimSymlinks: true });
    // This checkout's CLI as `sandbox-harness` (the docs test proves `npm link` itself).
    const bin = join(scratch, 'bin');
    await mkdir(bin);
    await writeFile(
      join(bin, 'sandbox-harness'),
      `#!/bin/sh\nexec node ${JSON.stringify(join(ROOT, 'dist', 'main.js'))} "$@"\n`,
    );
    await chmod(join(bin, 'sandbox-harness'), 0o755);
    ({ env, canary } = canaryEnv({
      ANTHROPIC_BASE_URL: NO_MODEL,
      OPENAI_BASE_URL: NO_MODEL,
      PATH: `${bin}:${process.env.PATH ?? ''}`,
    }));
  }, 600_000);

  afterAll(async () => {
    if (!scratch) return;
    await gcRunsUnder(copy, env);
    await removeQuietly(scratch);
  }, 300_000);

  it('there are recipes, and each has a teardown', () => {
    expect(recipes.map((r) => `${r.page}#${r.name}`)).toEqual(
      expect.arrayContaining(['docs/isolation.md#podman', 'docs/isolation.md#userns']),
    );
    for (const r of recipes) {
      expect(r.teardown.length, `${r.page} recipe ${r.name} has a teardown`).toBeGreaterThan(0);
      // A recipe shows its engine at work: a sandbox-harness command runs against it.
      expect(usesHarness(r), `${r.page} recipe ${r.name} runs sandbox-harness`).toBe(true);
    }
  });

  for (const recipe of recipes) {
    it(`${recipe.page}: recipe ${recipe.name}`, async () => {
      // What the recipe makes that was not here before goes again afterwards: its roots, and its
      // configuration with the folder it made for it.
      const configs = flagValues(recipe, '--config-file');
      const made = [
        ...flagValues(recipe, '--data-root'),
        ...flagValues(recipe, '--exec-root'),
        ...configs,
        ...configs.map((c) => dirname(c)),
      ].filter((path) => !existsSync(path));
      const namespaces = namespacesOf(recipe);
      const before = await mainEngineState(env);
      const sane = await defaultNetworkRun(env);
      expect(
        sane.code,
        `the main engine could not start a default-network container before the recipe: ${sane.stderr}`,
      ).toBe(0);

      const groups: number[] = [];
      const log: string[] = [];
      const runBlocks = async (blocks: DocBlock[], stopAtFailure: boolean): Promise<string[]> => {
        const failures: string[] = [];
        for (const block of blocks)
          for (const command of block.commands) {
            const ran = await runCommand(copy, command.text, env, {
              leaveGroup: true,
              onStart: (pgid) => groups.push(pgid),
              timeoutMs: 600_000,
            });
            log.push(`${command.text.split('\n')[0]}: exit ${ran.code} in ${ran.ms} ms`);
            process.stderr.write(`docs recipe ${recipe.name}: ${log.at(-1)}\n`);
            expectNoCanaryIn(canary, ran.stdout + ran.stderr, `the output of ${command.text}`);
            const prints = block.prints.filter(
              (p) => block.commands.find((c) => c.text.startsWith(p.prefix)) === command,
            );
            const wrong =
              ran.code !== command.expectExit
                ? `exit ${ran.code}, the page expects ${command.expectExit}`
                : prints.find((p) => !p.pattern.test(`${ran.stdout}\n${ran.stderr}`))?.pattern;
            if (wrong !== undefined) {
              failures.push(
                `${block.page}:${command.line}: ${command.text}\n${typeof wrong === 'string' ? wrong : `its output does not match ${String(wrong)}`}\n${ran.stdout.slice(-2000)}\n${ran.stderr.slice(-2000)}`,
              );
              if (stopAtFailure) return failures;
            }
          }
        return failures;
      };

      const failures = await runBlocks(recipe.blocks, true);
      // The teardown runs whatever happened, and must work on its own when the recipe did.
      const teardown = await runBlocks(recipe.teardown, false);
      if (failures.length === 0) failures.push(...teardown);

      // Nothing the recipe started is left: kill what is (so the machine is clean either way), then say so.
      const left: string[] = [];
      for (const pgid of groups) {
        const members = await groupMembers(pgid);
        if (members.length > 0) {
          left.push(...members);
          killGroup(pgid);
        }
      }
      for (const pidfile of flagValues(recipe, '--pidfile')) {
        const pid = Number((await readFile(pidfile, 'utf8').catch(() => '')).trim());
        if (pid > 0 && existsSync(`/proc/${pid}`)) left.push(`${pid} (from ${pidfile})`);
      }
      for (const name of namespaces)
        if (existsSync(`/run/netns/${name}`)) left.push(`network namespace ${name}`);

      const after = await mainEngineState(env);
      const still = await defaultNetworkRun(env);
      // What the recipe made that was not there before (data and exec roots), once nothing uses it.
      for (const path of made) {
        const mounts = await readFile('/proc/self/mounts', 'utf8');
        if (
          !mounts
            .split('\n')
            .some((line) => line.split(' ')[1]?.startsWith(`${path}/`) || line.split(' ')[1] === path)
        )
          await removeQuietly(path);
        else left.push(`mounts under ${path}`);
      }

      expect(failures, log.join('\n')).toEqual([]);
      expect(left, 'the teardown left these behind').toEqual([]);
      expect(after, 'the main engine, its configuration and networks, and docker0 are as they were').toEqual(
        before,
      );
      expect(
        still.code,
        `the main engine no longer starts a container on its default network: ${still.stderr}`,
      ).toBe(0);
    }, 1_800_000);
  }
});
