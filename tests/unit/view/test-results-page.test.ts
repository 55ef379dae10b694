import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { renderPage } from '../../../src/view/site.js';
import { openViewSource } from '../../../src/view/source.js';
import { tempDir, writeRun } from './fixtures.js';

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

describe('run page: per-test results of a verification', () => {
  it('shows the named verdict next to the exit code, then every test, failures first, escaped', async () => {
    const folder = await writeRun(runs, 'run-1');
    await writeFile(
      join(folder, 'attempts', '1', 'test-results.json'),
      JSON.stringify({
        exitCode: 1,
        tests: [
          { id: 'test/a.test.ts > ok', status: 'passed', durationMs: 3 },
          {
            id: 'test/a.test.ts > <script>alert(1)</script>',
            status: 'failed',
            message: 'expected 40 to be 39',
          },
        ],
        named: {
          verdict: 'unresolved',
          failToPass: [{ id: 'test/a.test.ts > <script>alert(1)</script>', status: 'failed' }],
          passToPass: [{ id: 'test/a.test.ts > ok', status: 'passed' }],
          quarantined: ['test/a.test.ts > flaky'],
        },
      }),
    );
    const html = await runPage('run-1');
    expect(html).toContain(
      '<span class="badge tone-bad">unresolved</span> FAIL_TO_PASS 0/1, PASS_TO_PASS 1/1, test command exit code 1, 1 quarantined',
    );
    expect(html).toContain('2 test(s) in the report: 1 passed, 1 failed, 0 skipped');
    expect(html).toContain('test/a.test.ts &gt; &lt;script&gt;alert(1)&lt;/script&gt;');
    expect(html).not.toContain('<script>alert(1)');
    expect(html.indexOf('expected 40 to be 39')).toBeLessThan(
      html.indexOf('test/a.test.ts &gt; ok</td><td><span'),
    );
  });

  it('a results file that is not what the harness writes is named as a problem, not shown', async () => {
    const folder = await writeRun(runs, 'run-1');
    await writeFile(join(folder, 'attempts', '1', 'test-results.json'), '{"tests": "all passed"}');
    const html = await runPage('run-1');
    expect(html).toContain(
      'attempts/1/test-results.json not shown: not the per-test results the harness writes',
    );
    expect(html).not.toContain('<h4>Tests</h4>');
  });
});
