/**
 * The page around every view: one inline stylesheet and one small inline script, both
 * fixed text, allowed by their sha256 in the Content-Security-Policy. Nothing is loaded
 * from anywhere, so a page works offline and injected markup could not run a script of its
 * own even if escaping ever failed.
 */
import { createHash } from 'node:crypto';
import { BASE_CSS } from '../html/css.js';
import { documentString, html, text, trustedHtml, type Html } from '../html/html.js';

const VIEW_CSS = `
body{max-width:1200px}
nav.top{display:flex;gap:1rem;align-items:baseline;border-bottom:1px solid #d0d7de;padding-bottom:.5rem;margin-bottom:1rem}
nav.top .where{color:#57606a;margin-left:auto;font-size:.85rem;overflow-wrap:anywhere}
a{color:#0969da}
td,th{text-align:left}td.num,th.num{text-align:right}
tr[hidden]{display:none}
.badge{display:inline-block;padding:0 .45rem;border-radius:1rem;font-size:.85rem;border:1px solid #d0d7de;background:#f6f8fa;white-space:nowrap}
.tone-good{background:#dafbe1;border-color:#4ac26b;color:#116329}
.tone-bad{background:#ffebe9;border-color:#ff8182;color:#a40e26}
.tone-warn{background:#fff8c5;border-color:#d4a72c;color:#7d4e00}
.tone-muted{background:#eaeef2;color:#57606a}
.problems{background:#fff8c5;border:1px solid #d4a72c;padding:.5rem .75rem;border-radius:4px}
dl.facts{display:grid;grid-template-columns:max-content 1fr;gap:.15rem 1rem;margin:.5rem 0}
dl.facts dt{color:#57606a}dl.facts dd{margin:0;overflow-wrap:anywhere}
details.block{margin:.4rem 0;border:1px solid #d0d7de;border-radius:4px}
details.block>summary{cursor:pointer;padding:.2rem .5rem;background:#f6f8fa}
details.block .size{color:#57606a;font-size:.8rem;margin-left:.5rem}
pre.out{margin:0;padding:.5rem;overflow:auto;max-height:40rem;white-space:pre-wrap;overflow-wrap:anywhere;font:12px/1.4 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}
pre.cmd{margin:.25rem 0;padding:.35rem .5rem;background:#1b1f24;color:#f6f8fa;border-radius:4px;white-space:pre-wrap;overflow-wrap:anywhere;font:12px/1.4 ui-monospace,Menlo,Consolas,monospace}
.d-add{background:#dafbe1}.d-del{background:#ffebe9}.d-hunk{color:#8250df}.d-file{font-weight:600}
.ctl{background:#ffd8b5;color:#953800;border-radius:2px;font-size:.85em}
mark.cut{background:#fff8c5;outline:1px dashed #d4a72c}
.msg{border-left:4px solid #d0d7de;padding:.25rem .75rem;margin:.6rem 0}
.msg .who{font-size:.8rem;color:#57606a;margin-bottom:.2rem}
.msg.assistant{border-color:#54aeff}.msg.user{border-color:#afb8c1}
.msg.tool-call{border-color:#8250df}.msg.tool-result{border-color:#4ac26b}.msg.tool-result.is-error{border-color:#ff8182}
.msg .prose{white-space:pre-wrap;overflow-wrap:anywhere;margin:0}
section.attempt{border-top:2px solid #d0d7de;margin-top:2rem}
form.filters{display:flex;gap:1rem;align-items:end;flex-wrap:wrap;margin:.5rem 0}
form.filters label{display:flex;flex-direction:column;font-size:.85rem;color:#57606a}
.muted{color:#57606a}
details.delegation{margin-left:1.5rem}details.delegation .nested{padding:0 .5rem}
ul.offences li,.review li{overflow-wrap:anywhere}
`;

export const PAGE_CSS = `${BASE_CSS}${VIEW_CSS}`;

// Filters on top of the server's: with JavaScript, rows hide at once without a round trip,
// and in an exported copy (no server) the query string is applied here.
export const PAGE_SCRIPT = `
(function () {
  var form = document.getElementById('filters');
  if (!form) return;
  var selects = Array.prototype.slice.call(form.querySelectorAll('select'));
  var params = new URLSearchParams(window.location.search);
  function apply() {
    var shown = 0;
    Array.prototype.forEach.call(document.querySelectorAll('tr[data-outcome]'), function (row) {
      var ok = selects.every(function (s) { return !s.value || row.getAttribute('data-' + s.name) === s.value; });
      row.hidden = !ok;
      if (ok) shown++;
    });
    var count = document.getElementById('shown');
    if (count) count.textContent = String(shown);
  }
  selects.forEach(function (s) {
    if (params.has(s.name)) s.value = params.get(s.name);
    s.addEventListener('change', function () {
      apply();
      var q = new URLSearchParams();
      selects.forEach(function (x) { if (x.value) q.set(x.name, x.value); });
      var search = q.toString();
      window.history.replaceState(null, '', window.location.pathname + (search ? '?' + search : ''));
    });
  });
  apply();
})();
`;

function sha256(content: string): string {
  return `'sha256-${createHash('sha256').update(content, 'utf8').digest('base64')}'`;
}

/**
 * `default-src 'none'`: no fetches, frames, images, fonts or plugins; the one stylesheet and
 * the one script by hash; forms only to this origin.
 */
export const CONTENT_SECURITY_POLICY = [
  "default-src 'none'",
  `style-src ${sha256(PAGE_CSS)}`,
  `script-src ${sha256(PAGE_SCRIPT)}`,
  "form-action 'self'",
  "base-uri 'none'",
  "frame-ancestors 'none'",
].join('; ');

// A <meta> policy cannot carry frame-ancestors, and 'self' means nothing for file:// pages.
const EXPORT_POLICY = CONTENT_SECURITY_POLICY.replace("; form-action 'self'", '').replace(
  "; frame-ancestors 'none'",
  '',
);

export interface PageOptions {
  title: string;
  /** Relative path from this page to the folder of index.html ('' or '../'). */
  up: string;
  body: Html;
  /** Whether the source has an eval page to link to. */
  evalLink: boolean;
  /** Shown at the top right: what is being viewed. */
  where: string;
  /** Static files (`view --export`) carry their policy in a <meta>. */
  exported: boolean;
}

export function page(o: PageOptions): string {
  const links = [html`<a href="${o.up}index.html">${o.evalLink ? 'All trials' : 'All runs'}</a>`];
  if (o.evalLink) links.push(html`<a href="${o.up}eval.html">Eval report</a>`);
  const policy = o.exported
    ? html`<meta http-equiv="Content-Security-Policy" content="${trustedHtml(EXPORT_POLICY)}">\n`
    : '';
  // The stylesheet and the script are this file's constants; their hashes are in the policy.
  return documentString(html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
${policy}<meta name="referrer" content="no-referrer">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${o.title}</title>
<style>${trustedHtml(PAGE_CSS)}</style>
</head>
<body>
<nav class="top">${links}<span class="where">${text(o.where)}</span></nav>
${o.body}
<script>${trustedHtml(PAGE_SCRIPT)}</script>
</body>
</html>
`);
}
