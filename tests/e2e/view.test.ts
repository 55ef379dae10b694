/**
 * `sandbox-harness view` end to end, in a real headless browser: the offline eval example
 * (plus one task whose recorded fix is wrong, so a failing trial has a diff and failing
 * test output) runs on real Docker into a temp folder, the built CLI serves it, and
 * Debian's Chromium, driven by playwright-core, clicks from the trial list into a failing
 * trial and finds its tool calls, its diff and its test output. The static export that
 * `eval` writes is opened from disk the same way. Screenshots go to .test-output/view/.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { access, cp, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { prepareExampleCopy } from '../../src/demo.js';
import { ensureBaseImage } from '../../src/sandbox/docker/images/ensure-base.js';
import { dockerEngine } from '../../src/sandbox/docker/engine/index.js';
import { LABEL } from '../../src/sandbox/docker/labels.js';
import { runCli, startCli, ROOT } from '../helpers/cli.js';

const CHROMIUM = '/usr/bin/chromium';
const SHOTS = join(ROOT, '.test-output', 'view');

interface Result {
  taskId: string;
  trial: number;
  category: string;
  runId: string;
}

let root: string;
let out: string;
let results: Result[] = [];
let context: BrowserContext;
let profile: string | undefined;
const consoleErrors: string[] = [];

async function newPage(): Promise<Page> {
  const page = await context.newPage();
  // A CSP violation or a script error shows up here; the viewer must cause none.
  page.on('console', (m) => {
    if (m.type() === 'error') consoleErrors.push(m.text());
  });
  page.on('pageerror', (e) => consoleErrors.push(e.message));
  return page;
}

/** The failing trial's page shows what the agent did: tool calls, diff, test output. */
async function expectFailingTrial(page: Page): Promise<void> {
  await expect.poll(() => page.locator('h1').innerText()).toMatch(/^Run wrong-fix-t0-/);
  const toolCalls = page.locator('.msg.tool-call');
  expect(await toolCalls.count()).toBeGreaterThan(0);
  expect(await toolCalls.first().innerText()).toContain('edit_file');
  expect(await toolCalls.first().innerText()).toContain('FREE_SHIPPING_THRESHOLD = 40;');
  const diff = page.locator('.attempt div.diff');
  await expect.poll(() => diff.isVisible()).toBe(true);
  expect(await diff.innerText()).toContain('+export const FREE_SHIPPING_THRESHOLD = 40; // EUR');
  const added = diff.locator('.d-add').first();
  // The page's stylesheet applied (the CSP hash matched): added lines are tinted.
  const background = await added.evaluate(
    (el) =>
      (
        globalThis as unknown as { getComputedStyle(e: unknown): { backgroundColor: string } }
      ).getComputedStyle(el).backgroundColor,
  );
  expect(background).not.toBe('rgba(0, 0, 0, 0)');
  // The test output may start collapsed (it is long); open it as a reader would.
  const output = page.locator('.attempt .test-output details');
  if ((await output.getAttribute('open')) === null) await output.locator('summary').click();
  const pre = output.locator('pre');
  await expect.poll(() => pre.isVisible()).toBe(true);
  expect(await pre.innerText()).toMatch(/not ok \d+ - /);
  expect(await page.locator('.attempt h2').first().innerText()).toContain('tests-failed');
}

describe('view in a real browser (offline eval example, real Docker, Chromium)', () => {
  beforeAll(async () => {
    await access(CHROMIUM).catch(() => {
      throw new Error(
        `${CHROMIUM} is missing: run \`bash scripts/setup.sh\` (as root it installs Debian's chromium)`,
      );
    });
    await dockerEngine().ping(5000);
    await ensureBaseImage('node', {});

    const copy = await prepareExampleCopy();
    root = dirname(copy.root);
    await cp(join(ROOT, 'examples', 'evals'), join(root, 'evals'), { recursive: true });
    await cp(
      join(ROOT, 'tests', 'e2e', 'cassettes', 'wrong-threshold.json'),
      join(root, 'evals', 'cassettes', 'wrong-threshold.json'),
    );
    const suite = join(root, 'evals', 'suite.yaml');
    await writeFile(
      suite,
      `${await readFile(suite, 'utf8')}  - id: wrong-fix\n    catalog: shipping-eval.yaml\n    ticket: ../shipping-service/tickets/OPS-412.md\n    cassette: cassettes/wrong-threshold.json\n`,
    );
    out = join(root, 'out');
    const r = await runCli(
      ['eval', suite, '-n', '1', '--concurrency', '2', '--keep', 'on-failure', '--out', out, '--json'],
      { cwd: root },
    );
    expect(r.code, r.stderr).toBe(0);
    results = (await readFile(join(out, 'results.jsonl'), 'utf8'))
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as Result);

    await mkdir(SHOTS, { recursive: true });
    profile = await mkdtemp(join(tmpdir(), 'view-chromium-'));
    context = await chromium.launchPersistentContext(profile, {
      executablePath: CHROMIUM,
      headless: true,
      args: [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--disable-background-networking',
        '--disable-quic',
        '--no-first-run',
        '--disable-component-update',
        '--disable-sync',
      ],
      viewport: { width: 1280, height: 900 },
    });
  }, 900_000);

  afterAll(async () => {
    await context?.close();
    // Only what this test made: the kept containers of its own runs, its temp folder.
    for (const r of results) {
      for (const c of await dockerEngine().containers.list({ [LABEL.run]: r.runId })) {
        await dockerEngine().containers.remove(c.id);
      }
    }
    if (root) await rm(root, { recursive: true, force: true });
    if (profile) await rm(profile, { recursive: true, force: true });
  });

  it('serves the trials; a click leads into a failing trial with its tool calls, diff and test output; Ctrl-C stops it', async () => {
    expect(results.find((r) => r.taskId === 'wrong-fix')?.category).toMatch(/tests.failed/);
    const server = startCli(['view', out, '--json'], { cwd: root });
    try {
      const first = await new Promise<string>((resolve, reject) => {
        let buffer = '';
        server.child.stdout!.on('data', (d: Buffer) => {
          buffer += d.toString();
          if (buffer.includes('\n')) resolve(buffer.slice(0, buffer.indexOf('\n')));
        });
        server.child.once('exit', (code) => reject(new Error(`view exited ${code} before printing its URL`)));
      });
      const { url, port, token } = JSON.parse(first) as { url: string; port: number; token: string };
      expect(url).toBe(`http://127.0.0.1:${port}/${token}/`);

      const page = await newPage();
      const response = await page.goto(url);
      expect(response?.status()).toBe(200);
      expect(await page.locator('h1').innerText()).toBe('Trials of shipping-offline');
      expect(await page.locator('tbody tr').count()).toBe(results.length);

      // Filter to the failures (the inline script filters at once), then click into one.
      const failed = page.locator('select[name="outcome"] option', { hasText: /^tests.failed/ });
      await page.selectOption('select[name="outcome"]', (await failed.getAttribute('value')) ?? '');
      const visible = page.locator('tbody tr:not([hidden])');
      await expect
        .poll(() => visible.count())
        .toBe(results.filter((r) => /^tests.failed$/.test(r.category)).length);
      expect(page.url()).toMatch(/\?outcome=tests.failed$/);
      await page.screenshot({ path: join(SHOTS, 'trials-filtered.png'), fullPage: true });
      await page.locator('tbody tr:not([hidden]) a', { hasText: 'wrong-fix-t0-' }).click();
      await expectFailingTrial(page);
      // The kept container and how to get a shell in it.
      expect(
        await page.locator('pre.cmd', { hasText: 'sandbox-harness shell wrong-fix-t0-' }).innerText(),
      ).toContain(`--runs-dir ${join(out, 'runs')}`);
      await page.screenshot({ path: join(SHOTS, 'failing-trial.png'), fullPage: true });

      // A trial the checker did not approve: its conversation and its verdict with reasons.
      await page.goto(url);
      await page.locator('tbody tr a', { hasText: 'hard-codes-reviewed-t0-' }).click();
      await expect
        .poll(() => page.locator('h3', { hasText: 'Conversation (checker)' }).count())
        .toBeGreaterThan(0);
      expect(await page.locator('.review').first().innerText()).toMatch(/request-changes/);
      await page.screenshot({ path: join(SHOTS, 'reviewed-trial.png'), fullPage: true });

      // The eval page: the report's chart and tables, each trial linked.
      await page.click('nav a:text("Eval report")');
      expect(await page.locator('svg[role="img"]').count()).toBeGreaterThan(0);
      for (const r of results) expect(await page.locator(`a:text("${r.runId}")`).count()).toBe(1);

      // Without JavaScript the server's own filtering hides the other rows.
      const noScript = await newPage();
      const cdp = await context.newCDPSession(noScript);
      await cdp.send('Emulation.setScriptExecutionDisabled', { value: true });
      await noScript.goto(`${url}?task=gives-up`);
      expect(await noScript.locator('tbody tr:not([hidden])').allInnerTexts()).toEqual([
        expect.stringContaining('gives-up'),
      ]);
      expect(await noScript.locator('tbody tr:not([hidden])').count()).toBe(1);
      await noScript.close();

      expect(consoleErrors).toEqual([]);
      server.child.kill('SIGINT');
      const done = await server.done;
      expect(done.code).toBe(0);
      await expect(fetch(url)).rejects.toThrow();
    } finally {
      server.child.kill('SIGKILL');
    }
  });

  it('the static export that eval wrote works from disk, and report.html links each trial to it', async () => {
    const page = await newPage();
    await page.goto(pathToFileURL(join(out, 'report.html')).href);
    const links = page.locator('a', { hasText: 'conversation, diff, test output' });
    expect(await links.count()).toBe(results.length);
    await page.locator('tr', { hasText: 'wrong-fix' }).locator('a').click();
    await expectFailingTrial(page);

    await page.goto(pathToFileURL(join(out, 'view', 'index.html')).href);
    await page.selectOption('select[name="task"]', 'gives-up');
    await expect.poll(() => page.locator('tbody tr:not([hidden])').count()).toBe(1);
    await page.screenshot({ path: join(SHOTS, 'export-index.png'), fullPage: true });
    expect(consoleErrors).toEqual([]);
  });
});

describe('view as a user runs it: help, usage errors, export', () => {
  it('--help says where it binds, that it needs the token, and how to export', async () => {
    const r = await runCli(['view', '--help']);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('127.0.0.1');
    expect(r.stdout).toContain('--export <dir>');
    expect(r.stdout).toContain('token');
  });

  it('bad input is a usage error (exit 2) that says what was expected', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'view-cli-'));
    try {
      const port = await runCli(['view', dir, '--port', '99999']);
      expect(port.code).toBe(2);
      expect(port.stderr).toContain('--port: expected a port number from 0 to 65535');
      const empty = await runCli(['view', dir]);
      expect(empty.code).toBe(2);
      expect(empty.stderr).toMatch(/no run records in .*\nhint: Give a repo/);
      const here = await runCli(['view'], { cwd: dir });
      expect(here.code).toBe(2);
      expect(here.stderr).toContain('no runs recorded here');
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('--export writes the pages and says where; it refuses a folder it did not write', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'view-cli-'));
    try {
      const runs = join(dir, 'repo', '.sandbox-harness', 'runs', '20261130-100000-abcdef');
      await mkdir(runs, { recursive: true });
      await writeFile(
        join(runs, 'run.json'),
        JSON.stringify({ id: '20261130-100000-abcdef', outcome: 'failed' }),
      );
      const r = await runCli(['view', join(dir, 'repo'), '--export', join(dir, 'site'), '--json']);
      expect(r.code, r.stderr).toBe(0);
      expect(JSON.parse(r.stdout)).toMatchObject({ dir: join(dir, 'site'), pages: 2 });
      await access(join(dir, 'site', 'runs', '20261130-100000-abcdef.html'));
      await writeFile(join(dir, 'notes.txt'), 'x');
      const refused = await runCli(['view', join(dir, 'repo'), '--export', dir]);
      expect(refused.code).toBe(2);
      expect(refused.stderr).toContain('already holds files that an earlier export did not write');
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
