import { describe, expect, it } from 'vitest';
import { html, isHtml, joinHtml, text, trustedHtml, type Html } from '../../../src/html/html.js';
import { table } from '../../../src/html/table.js';

const HOSTILE = `</td><script>alert(1)</script><img src=x onerror="alert(2)" title='x'>&amp;`;

describe('the html template escapes every value that is not Html', () => {
  it('escapes an interpolated string, in text and in a quoted attribute', () => {
    const out = String(html`<p title="${HOSTILE}">${HOSTILE}</p>`);
    expect(out).not.toContain('<script>');
    expect(out).not.toContain('<img');
    expect(out).toBe(
      `<p title="${'&lt;/td&gt;&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x onerror=&quot;alert(2)&quot; title=&#39;x&#39;&gt;&amp;amp;'}">` +
        `${'&lt;/td&gt;&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x onerror=&quot;alert(2)&quot; title=&#39;x&#39;&gt;&amp;amp;'}</p>`,
    );
  });

  it('keeps Html values as they are, and escapes the strings inside them once', () => {
    const inner = html`<b>${'<i>'}</b>`;
    expect(String(html`<p>${inner}</p>`)).toBe('<p><b>&lt;i&gt;</b></p>');
  });

  it('joins lists, escaping their strings and keeping their Html', () => {
    expect(String(html`<ul>${['<a>', html`<li>ok</li>`]}</ul>`)).toBe('<ul>&lt;a&gt;<li>ok</li></ul>');
    expect(String(joinHtml([html`<b>1</b>`, '<2>'], html`<br>`))).toBe('<b>1</b><br>&lt;2&gt;');
    expect(String(joinHtml(['a', 'b'], '<sep>'))).toBe('a&lt;sep&gt;b');
  });

  it('shows numbers, and nothing for undefined, null and false', () => {
    expect(String(html`${1.5}|${0}|${undefined}|${null}|${false}|${true}`)).toBe('1.5|0||||true');
  });

  it('spells control, bidi and invisible characters out, so none reaches the page (attributes and SVG too)', () => {
    const out = String(html`<text title="${'a\u202Eb'}">${'c\u0007d\u200Be'}</text>`);
    // eslint-disable-next-line no-control-regex -- the characters under test
    expect(out).not.toMatch(/[\u0007\u200B\u202E]/);
    expect(out).toBe('<text title="a\\u{202E}b">c\\u{0007}d\\u{200B}e</text>');
  });

  it('cannot be fooled by a look-alike of Html: only the module makes one', () => {
    const fake = { toString: () => '<script>alert(1)</script>' } as unknown as Html;
    expect(isHtml(fake)).toBe(false);
    expect(String(html`${fake}`)).toBe('&lt;script&gt;alert(1)&lt;/script&gt;');
  });

  it('text() marks control characters visibly in a text node, escaped on both sides', () => {
    expect(String(text('<b>\u0007</b>'))).toBe(
      '&lt;b&gt;<span class="ctl" title="control character">\\u{0007}</span>&lt;/b&gt;',
    );
  });

  it('trustedHtml is kept as written (for the harness own constants)', () => {
    expect(String(html`<style>${trustedHtml('a>b{}')}</style>`)).toBe('<style>a>b{}</style>');
  });
});

describe('table()', () => {
  it('escapes headers and text cells, keeps Html cells, and marks numeric columns', () => {
    const out = String(
      table(
        [{ label: '<h>' }, { label: 'n', numeric: true }],
        [[HOSTILE, 3], { cells: [html`<b>x</b>`, '4'], classes: ['total'], attrs: html` data-x="${'"y'}"` }],
      ),
    );
    expect(out).not.toContain('<script>');
    expect(out).toContain('<th>&lt;h&gt;</th><th class="num">n</th>');
    expect(out).toContain('<td class="num">3</td>');
    expect(out).toContain('<tr class="total" data-x="&quot;y"><td><b>x</b></td><td class="num">4</td></tr>');
  });
});
