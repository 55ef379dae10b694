/**
 * Every shell command of README.md and of every .md under docs/ runs as written (the convention
 * is in tests/helpers/doc-pages.ts and docs/development.md): one fresh copy of this checkout goes
 * through the documented set-up (`scripts/setup.sh`, `npm link` into a private prefix, so
 * `sandbox-harness` is on the PATH), then each page runs its blocks in order in its own copy of
 * that one, pages side by side (two at a time: each page's files, runs and working tree are
 * its own; the engine and its images are shared, as on a user's machine). A page added to
 * docs/ is run with nothing to change here.
 *
 * The environment holds key-shaped canaries (no output may show them) and no model answers:
 * both providers' base URLs lead to a closed loopback port, so a command that would call a
 * model fails instead of leaving the machine. Per page and per command times go to stderr and
 * to .test-output/docs/timings.json.
 */
import { mkdir, mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pLimit from 'p-limit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dockerEngine } from '../../src/sandbox/docker/engine/index.js';
import { ensureBaseImage } from '../../src/sandbox/docker/images/ensure-base.js';
import { canaryEnv, expectNoCanaryIn } from '../helpers/canary.js';
import { ROOT } from '../helpers/cli.js';
import { readDocPages, roleOf, type DocPage } from '../helpers/doc-pages.js';
import {
  copyCheckout,
  gcRunsUnder,
  pageCopy,
  removeQuietly,
  runCommand,
  runPage,
  type PageResult,
} from '../helpers/doc-runner.js';

/** Pages side by side; more only makes the 2-core machines here slower per page. */
const CONCURRENCY = 2;
/** A closed port on loopback: a model call fails at once, and nothing leaves the machine. */
const NO_MODEL = 'http://127.0.0.1:9';

const pages = (await readDocPages(ROOT)).filter((p) => p.blocks.some((b) => roleOf(b) === 'run'));

/** A rough cost, to start the longest pages first (the suite ends with its longest page). */
function weight(page: DocPage): number {
  let w = 0;
  for (const block of page.blocks.filter((b) => roleOf(b) === 'run'))
    for (const c of block.commands)
      w += /\b(fix|eval|demo)\b/.test(c.text) ? 30 : /\b(check|exec)\b/.test(c.text) ? 12 : 2;
  return page.path === 'README.md' ? Number.MAX_SAFE_INTEGER : w;
}

describe('every command of the docs runs as written', () => {
  let scratch: string;
  let prepared: string;
  let canary: string;
  let baseEnv: NodeJS.ProcessEnv;
  const limit = pLimit(CONCURRENCY);
  const results: PageResult[] = [];
  const started = Date.now();
  let preparedMs = 0;

  const envFor = (name: string): NodeJS.ProcessEnv => {
    const prefix = join(scratch, 'npm', name);
    return {
      ...baseEnv,
      // `npm link` on a page links into a prefix of its own, first on the PATH.
      npm_config_prefix: prefix,
      PATH: `${join(prefix, 'bin')}:${baseEnv.PATH ?? ''}`,
      // What a command leaves in a temporary folder (the demo's copy) goes with the scratch.
      TMPDIR: join(scratch, 'tmp', name),
    };
  };

  beforeAll(async () => {
    await dockerEngine().ping(5000);
    await ensureBaseImage('node', {});
    scratch = await mkdtemp(join(tmpdir(), 'sandbox-harness-docs-'));
    prepared = join(scratch, 'checkout');
    await copyCheckout(ROOT, prepared);
    // The dependencies `npm ci` would install from the same lock file, hard-linked from this
    // checkout: the set-up then finds them current (CI's own fresh clone runs the `npm ci`).
    // (The lock file keeps its time, or the set-up would see it as newer than the install.)
    const copied = await runCommand(
      ROOT,
      `cp -al node_modules ${JSON.stringify(join(prepared, 'node_modules'))} && touch -r package-lock.json ${JSON.stringify(join(prepared, 'package-lock.json'))}`,
      process.env,
    );
    expect(copied.code, copied.stderr).toBe(0);
    const shared = join(scratch, 'npm', 'shared');
    ({ env: baseEnv, canary } = canaryEnv({
      ANTHROPIC_BASE_URL: NO_MODEL,
      OPENAI_BASE_URL: NO_MODEL,
      npm_config_prefix: shared,
      PATH: `${join(shared, 'bin')}:${process.env.PATH ?? ''}`,
    }));
    // The set-up the README asks for, then `npm link` (into the shared prefix above).
    const setup = await runCommand(prepared, 'bash scripts/setup.sh', baseEnv, { timeoutMs: 900_000 });
    expect(setup.code, setup.stderr).toBe(0);
    const link = await runCommand(prepared, 'npm link --no-audit --no-fund', baseEnv);
    expect(link.code, link.stderr).toBe(0);
    expect((await runCommand(prepared, 'command -v sandbox-harness', baseEnv)).stdout.trim()).toBe(
      join(shared, 'bin', 'sandbox-harness'),
    );
    preparedMs = Date.now() - started;
    process.stderr.write(`docs: prepared the checkout in ${preparedMs} ms\n`);
  }, 900_000);

  afterAll(async () => {
    if (!scratch) return;
    for (const page of pages) await gcRunsUnder(join(scratch, 'pages', page.path), baseEnv);
    const total = Date.now() - started;
    const lines = [
      `docs: ${results.length} page(s) in ${total} ms (set-up ${preparedMs} ms, ${CONCURRENCY} at a time)`,
      ...[...results]
        .sort((a, b) => b.ms - a.ms)
        .map((r) => `  ${r.page}: ${r.ms} ms, ${r.ran.length} command(s)`),
    ];
    process.stderr.write(`${lines.join('\n')}\n`);
    await mkdir(join(ROOT, '.test-output', 'docs'), { recursive: true });
    await writeFile(
      join(ROOT, '.test-output', 'docs', 'timings.json'),
      `${JSON.stringify(
        {
          totalMs: total,
          setupMs: preparedMs,
          concurrency: CONCURRENCY,
          pages: results.map((r) => ({
            page: r.page,
            ms: r.ms,
            commands: r.ran.map((c) => ({ command: c.command, code: c.code, ms: c.ms })),
          })),
        },
        null,
        2,
      )}\n`,
    );
    await removeQuietly(scratch);
  }, 300_000);

  it('finds the pages, the README first', () => {
    expect(pages[0]?.path).toBe('README.md');
    expect(pages.length).toBeGreaterThan(5);
  });

  for (const page of [...pages].sort((a, b) => weight(b) - weight(a))) {
    it.concurrent(
      page.path,
      () =>
        limit(async () => {
          const copy = join(scratch, 'pages', page.path);
          await pageCopy(prepared, copy);
          const env = envFor(page.path);
          await mkdir(env.TMPDIR!, { recursive: true });
          const result = await runPage(page, copy, env, (ran) => {
            process.stderr.write(
              `docs: ${page.path}: ${ran.command.split('\n')[0]}: exit ${ran.code} in ${ran.ms} ms\n`,
            );
            expectNoCanaryIn(canary, ran.stdout + ran.stderr, `the output of ${ran.command}`);
          });
          results.push(result);
        }),
      1_800_000,
    );
  }
});
