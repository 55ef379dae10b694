import { describe, expect, it } from 'vitest';
import { html } from '../../../src/html/html.js';
import * as view from '../../../src/view/page-blocks.js';

// The helpers return `Html`; these assertions read the markup it stands for. An attribute
// value is an interpolation in the `html` template (attr() was folded into it).
const attr = (value: string): string => String(html`${value}`);
const text = (value: string): string => String(view.text(value));
const badge = (value: string | undefined): string => String(view.badge(value));
const block = (...args: Parameters<typeof view.block>): string => String(view.block(...args));
const markCuts = (body: string): string => String(view.markCuts(body));
const diffHtml = (diff: string): string => String(view.diffHtml(diff));
import { runHref, slugOf } from '../../../src/view/source.js';

describe('text() and attr(): everything shown is escaped', () => {
  it('escapes the HTML metacharacters in text', () => {
    expect(text(`</script><script>alert(1)</script> & "q" 'a'`)).toBe(
      '&lt;/script&gt;&lt;script&gt;alert(1)&lt;/script&gt; &amp; &quot;q&quot; &#39;a&#39;',
    );
  });

  it('escapes quotes in attribute values, so a value cannot close its attribute', () => {
    expect(attr(`x" onmouseover="alert(1)`)).toBe('x&quot; onmouseover=&quot;alert(1)');
    expect(attr(`x' onfocus='alert(1)`)).not.toContain("'");
  });

  it('shows control, bidi and invisible characters as visible marks instead of passing them on', () => {
    const html = text('a\u0007b\u202Ec\u200Bd\u001b[2Je\u0000f');
    // eslint-disable-next-line no-control-regex -- the characters under test
    expect(html).not.toMatch(/[\u0000-\u0008\u001b\u202E\u200B]/);
    expect(html).toContain('<span class="ctl" title="control character">\\u{0007}</span>');
    expect(html).toContain('\\u{202E}');
    expect(html).toContain('\\u{200B}');
    expect(html).toContain('\\u{001B}</span>[2J');
    expect(html).toContain('\\u{0000}');
  });

  it('escapes the text on both sides of a control character', () => {
    expect(text('<b>\u0007</b>')).toBe(
      '&lt;b&gt;<span class="ctl" title="control character">\\u{0007}</span>&lt;/b&gt;',
    );
  });

  it('drops colour codes and normalises CRLF but keeps tabs and newlines', () => {
    expect(text('\u001b[31mred\u001b[39m\r\nnext\tcol')).toBe('red\nnext\tcol');
  });

  it('spells controls out in attributes without markup', () => {
    expect(attr('a\u202Eb')).toBe('a\\u{202E}b');
  });

  it('colours known outcomes and leaves unknown ones neutral, escaped', () => {
    expect(badge('tests_failed')).toContain('tone-bad');
    expect(badge('tests-failed')).toContain('tone-bad');
    expect(badge('ready-for-review')).toContain('tone-good');
    expect(badge('review-verdict-<b>')).toBe('<span class="badge tone-none">review-verdict-&lt;b&gt;</span>');
    expect(badge(undefined)).toContain('>-<');
  });
});

describe('run page names', () => {
  it('keep plain folder names and hash anything else, so no folder name becomes a URL scheme or a path', () => {
    expect(slugOf('fixes-threshold-t0-20261130T122148')).toBe('fixes-threshold-t0-20261130T122148');
    for (const hostile of [
      'javascript:alert(1)',
      '../etc',
      '..',
      '.hidden',
      'a b',
      'a/b',
      'x"y',
      '\u202Eexe',
    ]) {
      expect(slugOf(hostile)).toMatch(/^run-[0-9a-f]{16}$/);
    }
    expect(slugOf('javascript:alert(1)')).not.toBe(slugOf('javascript:alert(2)'));
    expect(runHref('javascript:alert(1)')).toMatch(/^runs\/run-[0-9a-f]{16}\.html$/);
  });
});

describe('block(): large outputs are collapsed with their size', () => {
  it('collapses a large output and says how big it is', () => {
    const big = 'line of test output\n'.repeat(500);
    const html = block('test output', big);
    expect(html).toMatch(/^<details class="block large">/);
    expect(html).not.toMatch(/^<details[^>]* open/);
    expect(html).toContain('<span class="size">9.8 KiB, 501 lines</span>');
  });

  it('collapses many short lines too', () => {
    expect(block('x', 'a\n'.repeat(100))).not.toMatch(/^<details[^>]* open/);
  });

  it('shows a small output open', () => {
    const html = block('output', 'ok 1\n');
    expect(html).toMatch(/^<details class="block" open>/);
    expect(html).toContain('5 B, 2 lines');
  });

  it('escapes the label and the body', () => {
    const html = block('<b>label</b>', '</pre><script>x</script>');
    expect(html).not.toContain('<script>');
    expect(html).not.toContain('<b>label');
    expect(html).toContain('&lt;/pre&gt;&lt;script&gt;');
  });
});

describe('truncation marks', () => {
  it('highlights where the harness or the viewer cut output', () => {
    const out = markCuts(
      'head\n[... 10 of 90 characters of stdout cut here ...]\ntail\ntruncated: yes, kept head and tail\n[viewer: 5 bytes of 9 left out here; the whole file is a]\n',
    );
    expect(out.match(/<mark class="cut">/g)).toHaveLength(3);
    expect(out).toContain('<mark class="cut">[... 10 of 90 characters of stdout cut here ...]</mark>');
  });

  it('cannot be used to inject markup', () => {
    expect(markCuts('[... <script> cut here ...]')).toBe(
      '<mark class="cut">[... &lt;script&gt; cut here ...]</mark>',
    );
  });
});

describe('diffHtml', () => {
  it('tints added and removed lines and escapes them', () => {
    const html = diffHtml('--- a/x\n+++ b/x\n@@ -1 +1 @@\n-old\n+new </pre><script>alert(1)</script>\n same');
    expect(html).toContain('<span class="d-del">-old</span>');
    expect(html).toContain(
      '<span class="d-add">+new &lt;/pre&gt;&lt;script&gt;alert(1)&lt;/script&gt;</span>',
    );
    expect(html).toContain('<span class="d-hunk">@@ -1 +1 @@</span>');
    expect(html).not.toContain('<script>');
  });
});
