import { mkdir, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { loadRunBundle } from '../../../src/view/bundle.js';
import { renderPage } from '../../../src/view/site.js';
import { openViewSource, type ViewSource } from '../../../src/view/source.js';
import { addDelegationAndChecker, editRecord, HOSTILE, tempDir, writeRun } from './fixtures.js';

let dir: string;
let remove: () => Promise<void>;
let runs: string;

beforeEach(async () => {
  ({ dir, remove } = await tempDir());
  runs = join(dir, 'repo', '.sandbox-harness', 'runs');
  await mkdir(runs, { recursive: true });
});
afterEach(() => remove());

async function runPage(folder: string): Promise<string> {
  const source = await openViewSource(join(dir, 'repo'));
  const html = await renderPage(source, `runs/${folder}.html`, new URLSearchParams(), { exported: false });
  if (html === undefined) throw new Error(`no page for ${folder}`);
  return html;
}

/** The page's text outside our one inline script, where no script may appear. */
function withoutOwnScript(html: string): string {
  const start = html.lastIndexOf('<script>');
  return html.slice(0, start) + html.slice(html.indexOf('</script>', start) + '</script>'.length);
}

describe('run page: what the agent did, per attempt', () => {
  it('shows tool calls with their inputs, results with exit codes and cut marks, the gate, the diff and the test output', async () => {
    await writeRun(runs, '20261130-100000-abc123');
    const html = await runPage('20261130-100000-abc123');
    // Tool calls and their inputs.
    expect(html).toContain('<b class="tool-name">run_command</b>');
    expect(html).toContain('<pre class="cmd">$ npm test # &lt;/script&gt;');
    expect(html).toContain('<b class="tool-name">edit_file</b>');
    // The event table names what each call used (the log's one-line summary, escaped).
    expect(html).toMatch(/<td>run_command<\/td><td>npm test # &lt;\/script&gt;<\/td>/);
    expect(html).toContain('&quot;replacement&quot;: &quot;40 &lt;/script&gt;');
    // The result, with the exit code and duration from the event log, and the cut marked.
    expect(html).toContain('result of run_command · exit code 1 · 812 ms');
    expect(html).toContain('<span class="badge tone-warn">output cut</span>');
    expect(html).toContain('<mark class="cut">[... 5000 of 9000 characters of stdout cut here ...]</mark>');
    // Gate, diff, verification.
    expect(html).toMatch(
      /<h3>Gate<\/h3>\n<p><span class="badge tone-good">allowed<\/span> 1 changed file\(s\)<\/p>/,
    );
    expect(html).toContain(
      '<span class="d-add">+export const FREE = 40; // &lt;/pre&gt;&lt;script&gt;alert(4)&lt;/script&gt;</span>',
    );
    expect(html).toContain(
      '<span class="badge tone-bad">failed</span> in a fresh sandbox, 4.0 s, exit code 1, failing layer test',
    );
    expect(html).toContain('not ok 1 - orders of 39 EUR ship free');
    expect(html).not.toContain('\u001b[31m');
    // Timings, verdict, feedback, the model's own words.
    expect(html).toContain('<h2>Attempt 1 <span class="badge tone-bad">tests-failed</span></h2>');
    expect(html).toContain('<dt>duration</dt><dd>8.0 s</dd>');
    expect(html).toContain('The tests fail: expected 0, got 4.95');
    expect(html).toContain('Running the tests first.');
  });

  it('a broken test command is not shown as "tests fail before any change", but as what it was', async () => {
    const run = await writeRun(runs, '20261130-100000-abc123');
    await editRecord(run, (r) => {
      r.baseline = {
        failing: true,
        failingLayer: 'test',
        durationMs: 900,
        brokenCommand: {
          layer: 'test',
          command: 'npm run tset',
          kind: 'no-script',
          reason: 'npm has no script "tset"',
        },
      };
    });
    const html = await runPage('20261130-100000-abc123');
    expect(html).not.toContain('tests fail before any change');
    expect(html).toContain(
      'the test command did not run the tests (layer test): npm has no script &quot;tset&quot;',
    );
  });

  it("puts a passing run's verified patch before the attempts' whole conversations", async () => {
    const run = await writeRun(runs, '20261130-100000-abc123');
    await editRecord(run, (r) => {
      r.outcome = 'ready-for-review';
      r.patchFile = 'patch.diff';
    });
    await writeFile(join(run, 'patch.diff'), '--- a/src/x.ts\n+++ b/src/x.ts\n@@ -1 +1 @@\n-a\n+b\n');
    const html = await runPage('20261130-100000-abc123');
    const patch = html.indexOf('<h2>Final patch</h2>');
    expect(patch).toBeGreaterThan(0);
    expect(patch).toBeLessThan(html.indexOf('<h2>Attempt 1'));
    expect(patch).toBeLessThan(html.indexOf('Running the tests first.'));
    expect(html.match(/<h2>Final patch<\/h2>/g)).toHaveLength(1);
  });

  it('shows the kept container and the command that opens a shell in it', async () => {
    await writeRun(runs, '20261130-100000-abc123');
    const html = await runPage('20261130-100000-abc123');
    expect(html).toContain(`sandbox-harness shell 20261130-100000-abc123 --runs-dir ${runs}`);
    expect(html).toContain(
      `<code title="${'a'.repeat(64)}">${'a'.repeat(12)}</code></td><td><span class="badge tone-warn">kept</span>`,
    );
  });

  it('quotes a hostile run id in the shell command and says the id does not match the folder', async () => {
    await writeRun(runs, 'run-1', { id: "x'; rm -rf ~ #" });
    const html = await runPage('run-1');
    expect(html).toContain('sandbox-harness shell &#39;x&#39;\\&#39;&#39;; rm -rf ~ #&#39; --runs-dir');
    expect(html).toContain('run.json calls this run x&#39;; rm -rf ~ #, but its folder is run-1.');
  });

  it('never lets hostile text become markup', async () => {
    await writeRun(runs, 'run-1', {
      ticket: HOSTILE,
      outcome: HOSTILE,
      toolOutput: HOSTILE,
      testOutput: HOSTILE,
    });
    const html = withoutOwnScript(await runPage('run-1'));
    expect(html).not.toMatch(/<script/i);
    expect(html).not.toMatch(/<img/i);
    expect(html).not.toMatch(/<[a-z][^>]*\sonerror=/i);
    expect(html).toContain('&lt;img src=x onerror=alert(2)&gt;');
    expect(html).not.toMatch(/href="javascript:/i);
    expect(html).not.toContain('\u202E');
    expect(html).toContain('\\u{202E}');
  });

  it('reads tolerantly: unknown outcomes are shown, missing fields are "-", a torn event line is a note', async () => {
    const folder = await writeRun(runs, 'run-1', {
      outcome: 'review-changes-requested',
      verdict: 'review-verdict-x',
    });
    const html = await runPage('run-1');
    expect(html).toContain('<span class="badge tone-none">review-changes-requested</span>');
    expect(html).toContain('<span class="badge tone-none">review-verdict-x</span>');
    expect(html).toContain('events.jsonl: 1 line(s) that are not JSON objects');

    await writeFile(join(folder, 'run.json'), '{"attempts":[{"n":1}]}');
    const sparse = await runPage('run-1');
    expect(sparse).toContain('<dt>ticket</dt><dd>-</dd>');
    expect(sparse).toContain('<h1>Run run-1 <span class="badge tone-none">-</span></h1>');

    await writeFile(join(folder, 'run.json'), '{not json');
    expect(await runPage('run-1')).toContain('run.json is not valid JSON');
  });

  it('collapses a large test output, says its size, and shows only its head and tail', async () => {
    const big = `first line\n${'x'.repeat(99)}\n`.repeat(30_000) + 'last line\n';
    await writeRun(runs, 'run-1', { testOutput: big });
    const html = await runPage('run-1');
    const section = html.slice(html.indexOf('<div class="test-output">'));
    expect(section).toMatch(
      /^<div class="test-output"><details class="block large"><summary>test output \(attempts\/1\/test-output.txt\) \(3\.2 MiB file; the middle is left out\)/,
    );
    expect(section).toContain('<mark class="cut">[viewer: ');
    expect(section).toContain('last line');
    expect(html.length).toBeLessThan(1.5 * 1024 * 1024);
  });
});

describe('run page: sub-agents, checkers, gate reasons, reviews and older records', () => {
  it("nests a sub-agent's conversation under its delegate call, with its own tool facts", async () => {
    await addDelegationAndChecker(await writeRun(runs, 'run-1'));
    const html = await runPage('run-1');
    // The main agent's t1 keeps its own exit code, not the sub-agent's t1.
    expect(html).toContain('result of run_command · exit code 1 · 812 ms');
    const delegate = html.indexOf('<b class="tool-name">delegate</b>');
    const nested = html.indexOf(
      '<details class="block delegation"><summary>sub-agent conversation: completed, 2 turns</summary>',
    );
    expect(delegate).toBeGreaterThan(0);
    expect(nested).toBeGreaterThan(delegate);
    const sub = html.slice(nested, html.indexOf('</details></div></details>', nested));
    expect(sub).toContain('SUB-AGENT: the rule is 39 EUR');
    expect(sub).toContain('result of run_command · exit code 0 · 77 ms');
  });

  it("shows a checker's conversation as its own, named", async () => {
    await addDelegationAndChecker(await writeRun(runs, 'run-1'));
    const html = await runPage('run-1');
    expect(html).toContain('<h3>Conversation (maker)</h3>');
    expect(html).toContain('<h3>Conversation (checker)</h3>');
    expect(html.indexOf('CHECKER: the threshold is wrong')).toBeGreaterThan(
      html.indexOf('<h3>Conversation (checker)</h3>'),
    );
  });

  it("lists the gate's offending paths and why, and the checker's verdict with its reasons", async () => {
    const folder = await writeRun(runs, 'run-1', { verdict: 'rejected' });
    await editRecord(folder, (r) => {
      const [attempt] = r.attempts as Record<string, unknown>[];
      attempt!.gate = {
        ok: false,
        offences: [{ path: 'test/x.test.ts', kind: 'outside-allowlist', why: `not editable ${HOSTILE}` }],
      };
      attempt!.reviews = [
        {
          round: 1,
          verdict: 'request-changes',
          summary: 'The fix hides the bug.',
          reasons: [{ file: 'src/shipping.ts', rule: 'freeShippingThreshold', text: 'must be 39' }],
        },
      ];
      r.error = { code: 'RUN_TIMEOUT', category: 'usage', message: 'run time limit passed' };
    });
    const html = await runPage('run-1');
    expect(html).toContain(
      '<ul class="offences"><li><code>test/x.test.ts</code> (outside-allowlist): not editable &lt;/script&gt;',
    );
    expect(html).toContain('<span class="badge tone-bad">rejected</span>');
    expect(html).toContain(
      '<p>round 1: <span class="badge tone-bad">request-changes</span> The fix hides the bug.</p><ul><li><code>src/shipping.ts, freeShippingThreshold</code>: must be 39</li></ul>',
    );
    expect(html).toContain('harness error RUN_TIMEOUT (usage): run time limit passed');
    expect(html).toContain('<dt>engine</dt><dd>local</dd>');
  });

  it('reads the older record shape too (agentStatus, no gate on the attempt)', async () => {
    const folder = await writeRun(runs, 'run-1');
    await editRecord(folder, (r) => {
      const [attempt] = r.attempts as Record<string, unknown>[];
      delete attempt!.agentStop;
      delete attempt!.gate;
      attempt!.agentStatus = 'max_turns';
      r.version = 1;
    });
    const html = await runPage('run-1');
    expect(html).toContain('<dt>agent stopped</dt><dd>max_turns</dd>');
    expect(html).toMatch(
      /<h3>Gate<\/h3>\n<p><span class="badge tone-good">allowed<\/span> 1 changed file\(s\)<\/p>/,
    );
  });
});

describe('run files are read without following links', () => {
  let source: ViewSource;
  const secret = 'SECRET-FROM-OUTSIDE-THE-RUN';

  beforeEach(async () => {
    await writeFile(join(dir, 'secret.txt'), `${secret}\n`);
    await mkdir(join(dir, 'elsewhere', '1'), { recursive: true });
    await writeFile(join(dir, 'elsewhere', '1', 'test-output.txt'), secret);
    source = await openViewSource(join(dir, 'repo'));
  });

  it('refuses a symlinked file and says so', async () => {
    const folder = await writeRun(runs, 'run-1');
    const target = join(folder, 'attempts', '1', 'test-output.txt');
    await rm(target);
    await symlink(join(dir, 'secret.txt'), target);
    await rm(join(folder, 'ticket.md'));
    await symlink('../../../../secret.txt', join(folder, 'ticket.md'));
    const bundle = await loadRunBundle(source, 'run-1');
    expect(bundle.attempts[0]?.testOutput).toBeUndefined();
    expect(bundle.ticket).toBeUndefined();
    expect(bundle.problems).toContain('attempts/1/test-output.txt not read: a symbolic link');
    const html = await runPage('run-1');
    expect(html).not.toContain(secret);
    expect(html).toContain('ticket.md not read: a symbolic link');
  });

  it('does not follow a symlinked folder on the way to a file', async () => {
    const folder = await writeRun(runs, 'run-1');
    await rm(join(folder, 'attempts'), { recursive: true });
    await symlink(join(dir, 'elsewhere'), join(folder, 'attempts'));
    const html = await runPage('run-1');
    expect(html).not.toContain(secret);
    expect(html).toContain('attempts/1/test-output.txt not read: attempts is a symbolic link');
  });

  it('refuses a symlinked run.json and a symlinked run folder', async () => {
    const folder = await writeRun(runs, 'run-1');
    await rm(join(folder, 'run.json'));
    await symlink(join(dir, 'secret.txt'), join(folder, 'run.json'));
    await writeRun(join(dir, 'elsewhere'), 'outside-run');
    await symlink(join(dir, 'elsewhere', 'outside-run'), join(runs, 'linked-run'));
    const index = (await renderPage(source, 'index.html', new URLSearchParams(), { exported: false })) ?? '';
    expect(index).toContain('run.json not read: a symbolic link');
    expect(index).not.toContain('linked-run');
    expect(
      await renderPage(source, 'runs/linked-run.html', new URLSearchParams(), { exported: false }),
    ).toBeUndefined();
  });

  it('does not hang on a FIFO where a file should be', async () => {
    const folder = await writeRun(runs, 'run-1');
    await rm(join(folder, 'attempts', '1', 'test-output.txt'));
    execFileSync('mkfifo', [join(folder, 'attempts', '1', 'test-output.txt')]);
    const bundle = await loadRunBundle(source, 'run-1');
    expect(bundle.problems).toContain('attempts/1/test-output.txt not read: not a regular file');
  });

  it('reads the files it shows from inside the run folder only', async () => {
    const folder = await writeRun(runs, 'run-1');
    const bundle = await loadRunBundle(source, 'run-1');
    expect(bundle.dir).toBe(folder);
    expect(bundle.attempts[0]?.patch?.text).toBe(
      await readFile(join(folder, 'attempts', '1', 'patch.diff'), 'utf8'),
    );
  });
});

describe('run page: egress', () => {
  it("shows each egress sandbox's proxy log, escaped, and reads only egress/*.jsonl files the record names", async () => {
    const runDir = await writeRun(runs, '20261130-100000-egr001');
    await mkdir(join(runDir, 'egress'));
    const lines = [
      {
        time: '2026-11-30T10:00:01.000Z',
        method: 'CONNECT',
        host: 'registry.npmjs.org',
        port: 443,
        allowed: true,
        rule: 'allow registry.npmjs.org:443,80',
        bytesOut: 512,
        bytesIn: 2048,
      },
      {
        time: '2026-11-30T10:00:02.000Z',
        method: 'CONNECT',
        host: 'evil.example',
        port: 443,
        allowed: false,
        rule: 'not-allowed',
        reason: `not allowed ${HOSTILE}`,
        bytesOut: 0,
        bytesIn: 0,
      },
    ];
    await writeFile(
      join(runDir, 'egress', 'attempt-1.jsonl'),
      `${lines.map((l) => JSON.stringify(l)).join('\n')}\nnot json\n`,
    );
    await writeFile(join(dir, 'outside.jsonl'), '{"time":"x","allowed":true,"host":"leaked.example"}\n');
    await editRecord(runDir, (record) => {
      record.containers = [
        {
          role: 'attempt-1',
          id: 'a'.repeat(64),
          kept: true,
          egress: { allowed: 1, denied: 1, file: 'egress/attempt-1.jsonl' },
        },
        {
          role: 'verify-1',
          id: 'b'.repeat(64),
          kept: false,
          egress: { allowed: 1, denied: 0, file: '../../../../outside.jsonl' },
        },
      ];
    });
    const html = await runPage('20261130-100000-egr001');
    expect(html).toContain('<h2>Egress</h2>');
    expect(html).toContain('attempt-1: 1 allowed, 1 denied');
    expect(html).toContain('CONNECT registry.npmjs.org:443');
    expect(html).toContain('512 / 2048');
    expect(html).toContain('CONNECT evil.example:443');
    expect(withoutOwnScript(html)).not.toContain('<script>alert(1)');
    expect(html).not.toContain('leaked.example');
  });
});

describe('run page: a failed run opens with why', () => {
  it('puts the last attempt and what it was told before the ticket and the baseline output', async () => {
    await writeRun(runs, 'r-why');
    const html = await runPage('r-why');
    const why = html.indexOf('<h2>Why it ended</h2>');
    expect(why).toBeGreaterThan(0);
    expect(why).toBeLessThan(html.indexOf('<h2>Ticket</h2>'));
    expect(why).toBeLessThan(html.indexOf('<h2>Baseline</h2>'));
    expect(html.slice(why, html.indexOf('<h2>Ticket</h2>'))).toContain('href="#attempt-1"');
  });

  it('a run that passed has no such section', async () => {
    await writeRun(runs, 'r-ok', { outcome: 'ready-for-review', verdict: 'passed' });
    expect(await runPage('r-ok')).not.toContain('Why it ended');
  });
});
