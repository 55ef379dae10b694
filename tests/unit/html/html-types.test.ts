/**
 * A forgotten escape is a type error: these lines are checked by `tsc` (the project's
 * typecheck covers tests/), and each `@ts-expect-error` fails the typecheck if the line
 * below it ever compiles, i.e. if a plain string could pass for `Html`.
 */
import { describe, expect, it } from 'vitest';
import { html, type Html } from '../../../src/html/html.js';
import type { PageOptions } from '../../../src/view/layout.js';
import { block } from '../../../src/view/page-blocks.js';

function needsHtml(markup: Html): string {
  return String(markup);
}

describe('Html by type', () => {
  it('refuses a string where markup is required, and accepts what the template made', () => {
    const fromRecord = '<img src=x onerror=alert(1)>';
    // @ts-expect-error a string is not Html
    const wrong: Html = fromRecord;
    // @ts-expect-error a string is not Html, even as an argument
    needsHtml(fromRecord);
    const body: PageOptions['body'] = html`<p>${fromRecord}</p>`;
    // @ts-expect-error a page body must be markup, not text
    const badBody: PageOptions['body'] = fromRecord;
    // @ts-expect-error block()'s highlighted body must be markup
    block('label', 'body', { html: fromRecord });
    // @ts-expect-error an object that looks like Html is not Html
    needsHtml({ toString: () => fromRecord });
    expect(needsHtml(body)).toBe('<p>&lt;img src=x onerror=alert(1)&gt;</p>');
    expect([wrong, badBody]).toHaveLength(2);
  });
});
