/**
 * The viewer's three pages, rendered from loaded data to HTML strings: the list of runs or
 * trials (filterable by outcome and task, on the server and without JavaScript), one run
 * (per attempt: conversation, gate, diff, verification output, timings, containers), and an
 * eval (the report's charts and tables, every trial linked to its run). Every piece is an
 * `Html` value of the `html` template, which escapes every value that is not `Html`; links
 * are built only from slugs (`source.ts`).
 */
import { renderReportSections } from '../evals/report-html.js';
import type { EvalSummary, SummaryComparison } from '../evals/summary.js';
import { html, joinHtml, type Html, type HtmlValue } from '../html/html.js';
import { shellJoin } from '../sandbox/shell.js';
import type {
  AttemptView,
  ContainerView,
  ConversationItem,
  ConversationView,
  FileText,
  ReviewView,
  RewardView,
  RunBundle,
  ViewEvent,
} from './bundle.js';
import {
  badge,
  block,
  COLLAPSE,
  dash,
  diffHtml,
  formatBytes,
  formatMs,
  hasCutMark,
  spell,
  table,
  text,
  type Column,
  type Row,
} from './page-blocks.js';
import { showJson } from './json.js';
import { page } from './layout.js';
import { byAttention, type StoredResults } from '../test-results/stored.js';

export interface PageContext {
  /** What is being viewed, shown at the top of every page. */
  where: string;
  evalLink: boolean;
  exported: boolean;
}

// ---------------------------------------------------------------------------------------
// The list

export interface ListRow {
  id: string;
  /** Relative to index.html; absent when the run has no folder to show. */
  href?: string | undefined;
  task?: string | undefined;
  trial?: number | undefined;
  /** Outcome (runs) or category (trials), as recorded. */
  result?: string | undefined;
  attempts?: number | undefined;
  turns?: number | undefined;
  tokens?: number | undefined;
  durationMs?: number | undefined;
  startedAt?: string | undefined;
  note?: string | undefined;
  /** A trial's reward (Harbor tasks): its score, or why it has none. */
  reward?: string | undefined;
}

export interface ListFilters {
  outcome?: string;
  task?: string;
}

export interface ListPage {
  heading: string;
  intro?: Html;
  rows: ListRow[];
  filters: ListFilters;
}

function matches(row: ListRow, filters: ListFilters): boolean {
  return (
    (!filters.outcome || spell(row.result ?? '') === filters.outcome) &&
    (!filters.task || spell(row.task ?? '') === filters.task)
  );
}

function filterSelect(
  name: string,
  label: string,
  values: (string | undefined)[],
  chosen: string | undefined,
): Html {
  const counts = new Map<string, number>();
  for (const v of values)
    if (v !== undefined && v !== '') counts.set(spell(v), (counts.get(spell(v)) ?? 0) + 1);
  const options = [...counts.entries()]
    .sort(([a], [b]) => a.localeCompare(b))
    .map(
      ([value, count]) =>
        html`<option value="${value}"${value === chosen ? html` selected` : ''}>${text(value)} (${count})</option>`,
    );
  return html`<label>${text(label)}<select name="${name}"><option value="">all (${values.length})</option>${options}</select></label>`;
}

const RUN_COLUMNS: Column[] = [
  { label: 'run' },
  { label: 'task' },
  { label: 'trial', numeric: true },
  { label: 'outcome' },
  { label: 'attempts', numeric: true },
  { label: 'turns', numeric: true },
  { label: 'tokens', numeric: true },
  { label: 'duration', numeric: true },
  { label: 'started' },
];

/**
 * Runs or trials, one per row, linked to their pages; rows the filters leave out are hidden.
 * Trials with a reward (Harbor tasks) get a reward column; other lists look as they always did.
 */
function runsTable(list: ListRow[], filters: ListFilters = {}): Html {
  const rewards = list.some((r) => r.reward !== undefined);
  const columns = rewards
    ? [...RUN_COLUMNS.slice(0, 4), { label: 'reward' }, ...RUN_COLUMNS.slice(4)]
    : RUN_COLUMNS;
  const rows: Row[] = list.map((r) => ({
    attrs: html` data-outcome="${r.result ?? ''}" data-task="${r.task ?? ''}"${matches(r, filters) ? '' : html` hidden`}`,
    cells: [
      html`${r.href ? html`<a href="${r.href}">${text(r.id)}</a>` : text(r.id)}${r.note ? html`<br><span class="muted">${text(r.note)}</span>` : ''}`,
      text(dash(r.task)),
      dash(r.trial),
      badge(r.result),
      ...(rewards ? [text(dash(r.reward))] : []),
      dash(r.attempts),
      dash(r.turns),
      dash(r.tokens),
      formatMs(r.durationMs),
      text(dash(r.startedAt)),
    ],
  }));
  return table(columns, rows);
}

export function renderListPage(list: ListPage, ctx: PageContext): string {
  const shown = list.rows.filter((r) => matches(r, list.filters)).length;
  const form = html`<form id="filters" class="filters" method="get" action="index.html">${filterSelect(
    'outcome',
    'outcome',
    list.rows.map((r) => r.result),
    list.filters.outcome,
  )}${filterSelect(
    'task',
    'task',
    list.rows.map((r) => r.task),
    list.filters.task,
  )}<button type="submit">Filter</button><span class="muted">showing <b id="shown">${shown}</b> of ${list.rows.length}</span></form>${
    ctx.exported
      ? html`<noscript><p class="muted">Filtering this exported copy needs JavaScript; <code>sandbox-harness view</code> filters without it.</p></noscript>`
      : ''
  }`;
  const body = joinHtml(
    [
      html`<h1>${text(list.heading)}</h1>`,
      list.intro ? html`<p class="meta">${list.intro}</p>` : '',
      form,
      list.rows.length === 0 ? html`<p>No runs recorded here yet.</p>` : runsTable(list.rows, list.filters),
    ],
    '\n',
  );
  return page({ title: list.heading, up: '', body, ...ctx });
}

// ---------------------------------------------------------------------------------------
// One run

function facts(entries: [string, HtmlValue][]): Html {
  return html`<dl class="facts">${entries.map(([k, v]) => html`<dt>${text(k)}</dt><dd>${v}</dd>`)}</dl>`;
}

function fileBlock(label: string, file: FileText | undefined, kind?: string): Html | undefined {
  if (!file) return undefined;
  const note = file.omitted > 0 ? ` (${formatBytes(file.bytes)} file; the middle is left out)` : '';
  return block(`${label}${note}`, file.text, {
    ...(kind ? { kind } : {}),
    ...(kind === 'diff' ? { html: diffHtml(file.text) } : {}),
  });
}

function problemsBox(problems: string[]): Html | undefined {
  if (problems.length === 0) return undefined;
  return html`<div class="problems"><b>Not everything could be read:</b><ul>${problems.map((p) => html`<li>${text(p)}</li>`)}</ul></div>`;
}

function inputField(input: unknown, name: string): string | undefined {
  if (input === null || typeof input !== 'object') return undefined;
  const value = (input as Record<string, unknown>)[name];
  return typeof value === 'string' ? value : undefined;
}

function conversationItem(item: ConversationItem): Html {
  const turn = item.turn > 0 ? ` · turn ${item.turn}` : '';
  switch (item.kind) {
    case 'text': {
      const who =
        item.role === 'assistant' ? 'model' : item.role === 'user' ? 'harness (to the model)' : item.role;
      const body =
        item.role === 'assistant' && Buffer.byteLength(item.text) <= COLLAPSE.bytes
          ? html`<p class="prose">${text(item.text)}</p>`
          : block(`${who} text`, item.text);
      return html`<div class="msg ${item.role === 'assistant' ? 'assistant' : 'user'}"><div class="who">${text(who + turn)}</div>${body}</div>`;
    }
    case 'tool_use': {
      const command = inputField(item.input, 'command');
      const path = inputField(item.input, 'path');
      const headline = command !== undefined ? html`<pre class="cmd">$ ${text(command)}</pre>` : '';
      return html`<div class="msg tool-call"><div class="who">tool call · <b class="tool-name">${text(item.name)}</b>${path !== undefined ? html` · ${text(path)}` : ''}${text(turn)}</div>${headline}${block(`input of ${item.name}`, showJson(item.input), { open: command === undefined })}</div>`;
    }
    case 'tool_result': {
      const bits = [
        `result of ${item.tool ?? 'an unknown call'}`,
        item.exitCode !== undefined ? `exit code ${item.exitCode}` : '',
        item.durationMs !== undefined ? formatMs(item.durationMs) : '',
        item.isError ? 'error' : '',
      ].filter(Boolean);
      const cut = hasCutMark(item.content) ? html` <span class="badge tone-warn">output cut</span>` : '';
      return html`<div class="msg tool-result${item.isError ? ' is-error' : ''}"><div class="who">${text(bits.join(' · '))}${cut}</div>${block(`output of ${item.tool ?? 'the call'}`, item.content)}</div>`;
    }
    case 'other':
      return html`<div class="msg"><div class="who">${text(`${item.role}: unknown block${turn}`)}</div>${block('raw', item.raw)}</div>`;
  }
}

const SHOWN_TESTS = 500;

/**
 * The verification's tests one by one: the named tests' verdict next to the exit code, then
 * every test, those that did not pass first (a long report is cut, and says so).
 */
function testResultsHtml(results: StoredResults): Html {
  const out: Html[] = [html`<h4>Tests</h4>`];
  if (results.refused)
    out.push(html`<p class="problems">The test report was refused: ${text(results.refused)}</p>`);
  const named = results.named;
  const exit = results.exitCode !== undefined ? `, test command exit code ${results.exitCode}` : '';
  if (named) {
    const passed = (list: { status: string }[]) => list.filter((t) => t.status === 'passed').length;
    out.push(
      html`<p>${badge(named.verdict)} FAIL_TO_PASS ${passed(named.failToPass)}/${named.failToPass.length}, PASS_TO_PASS ${passed(named.passToPass)}/${named.passToPass.length}${text(exit)}${named.quarantined.length ? `, ${named.quarantined.length} quarantined` : ''}</p>`,
    );
    const rows = byAttention([
      ...named.failToPass.map((t) => ({ ...t, list: 'FAIL_TO_PASS' })),
      ...named.passToPass.map((t) => ({ ...t, list: 'PASS_TO_PASS' })),
      ...named.quarantined.map((id) => ({ id, status: 'skipped' as const, list: 'quarantined' })),
    ]);
    out.push(
      table(
        [{ label: 'named test' }, { label: 'list' }, { label: 'status' }],
        rows.slice(0, SHOWN_TESTS).map((t) => [text(t.id), t.list, badge(t.status)]),
      ),
    );
  } else if (exit) out.push(html`<p class="muted">${text(exit.slice(2))}</p>`);
  const tests = byAttention(results.tests);
  const counts = ['passed', 'failed', 'skipped']
    .map((s) => `${tests.filter((t) => t.status === s).length} ${s}`)
    .join(', ');
  out.push(
    html`<details class="block"${named ? '' : html` open`}><summary>${tests.length} test(s) in the report: ${counts}${tests.length > SHOWN_TESTS ? ` (the first ${SHOWN_TESTS} shown)` : ''}</summary>`,
    table(
      [{ label: 'test' }, { label: 'status' }, { label: 'took', numeric: true }, { label: 'message' }],
      tests
        .slice(0, SHOWN_TESTS)
        .map((t) => [
          text(t.id),
          badge(t.status),
          t.durationMs === undefined ? '-' : formatMs(t.durationMs),
          text(dash(t.message)),
        ]),
    ),
    html`</details>`,
  );
  return joinHtml(out, '\n');
}

/** A reward's one-line account: the score and its file, or why there is none. */
function rewardLine(r: RewardView): string {
  if (r.status === 'refused' || r.score === undefined)
    return `no score: ${r.reason ?? 'no reason recorded'} (counts 0)`;
  return `${r.score}${r.file ? ` from ${r.file}` : ''}`;
}

/** The verifier's reward: the score that decided the verdict, its named values, or why it was refused. */
function rewardHtml(r: RewardView): Html {
  const head =
    r.status === 'refused' || r.score === undefined
      ? html`<p class="problems">Reward: ${text(rewardLine(r))}</p>`
      : html`<p>Reward: <b>${text(rewardLine(r))}</b> (full marks, 1, is a pass)</p>`;
  const values =
    r.values.length > 0
      ? table(
          [{ label: 'named value' }, { label: 'value', numeric: true }],
          r.values.map(([name, value]) => [text(name), String(value)]),
        )
      : '';
  return html`<h4>Reward</h4>${head}${values}`;
}

function eventTable(events: ViewEvent[]): Html {
  if (events.length === 0) return html`<p class="muted">No events recorded.</p>`;
  const start = Date.parse(events[0]?.time ?? '');
  const rows = events.map((e) => {
    const at = Date.parse(e.time ?? '');
    // `-` for a time that cannot be placed (unreadable, or before the first event).
    const offset = at - start >= 0 ? `+${formatMs(at - start)}` : '-';
    const tokens = e.tokens ? `${dash(e.tokens.input)}+${dash(e.tokens.output)}` : '';
    return [
      offset,
      text(e.kind),
      dash(e.attempt),
      dash(e.turn),
      text(dash(e.tool)),
      e.durationMs === undefined ? '-' : formatMs(e.durationMs),
      dash(e.exitCode),
      tokens || '-',
      e.status ? badge(e.status) : '-',
      text(dash(e.message)),
    ];
  });
  const columns: Column[] = [
    { label: 'at' },
    { label: 'event' },
    { label: 'attempt', numeric: true },
    { label: 'turn', numeric: true },
    { label: 'tool' },
    { label: 'took', numeric: true },
    { label: 'exit', numeric: true },
    { label: 'tokens in+out' },
    { label: 'status' },
    { label: 'message' },
  ];
  return table(columns, rows);
}

/** Rows of the egress table per sandbox, at most this many (the file has every line). */
const MAX_EGRESS_ROWS = 500;

function egressTables(bundle: RunBundle): Html {
  const out: Html[] = [];
  for (const { role, log } of bundle.egress) {
    const rows: Row[] = [];
    let allowed = 0;
    let denied = 0;
    for (const line of (log?.text ?? '').split('\n')) {
      let entry: Record<string, unknown> | undefined;
      try {
        entry = line.trim() ? (JSON.parse(line) as Record<string, unknown>) : undefined;
      } catch {
        entry = undefined;
      }
      if (!entry || typeof entry !== 'object') continue;
      const ok = entry.allowed === true;
      if (ok) allowed++;
      else denied++;
      if (rows.length >= MAX_EGRESS_ROWS) continue;
      const s = (v: unknown) => (typeof v === 'string' || typeof v === 'number' ? String(v) : '');
      rows.push([
        text(s(entry.time)),
        ok
          ? html`<span class="badge tone-good">allowed</span>`
          : html`<span class="badge tone-bad">denied</span>`,
        text(`${s(entry.method)} ${s(entry.host)}${entry.port ? `:${s(entry.port)}` : ''}`),
        text(ok ? s(entry.rule) : s(entry.reason) || s(entry.rule)),
        text(`${s(entry.bytesOut) || '0'} / ${s(entry.bytesIn) || '0'}`),
      ]);
    }
    out.push(
      html`<h3>${text(dash(role))}: ${allowed} allowed, ${denied} denied</h3>`,
      table(
        [
          { label: 'time' },
          { label: 'verdict' },
          { label: 'request' },
          { label: 'rule or reason' },
          { label: 'bytes out / in', numeric: true },
        ],
        rows,
      ),
    );
  }
  return joinHtml(out, '\n');
}

function containersTable(bundle: RunBundle): Html {
  const seen = new Map<string, ContainerView & { id: string }>();
  for (const c of [...bundle.containers, ...bundle.attempts.flatMap((a) => a.containers)]) {
    if (c.id === undefined) continue;
    const known = seen.get(c.id);
    seen.set(c.id, {
      id: c.id,
      role: c.role ?? known?.role,
      kept: (known?.kept ?? false) || c.kept === true,
      engine: c.engine ?? known?.engine,
    });
  }
  const all = [...seen.values()];
  if (all.length === 0) return html`<p class="muted">No containers recorded.</p>`;
  const rows = all.map((c) => [
    text(dash(c.role)),
    html`<code title="${c.id}">${text(c.id.slice(0, 12))}</code>`,
    c.kept ? html`<span class="badge tone-warn">kept</span>` : 'removed',
    text(dash(c.engine)),
  ]);
  const kept = all.filter((c) => c.kept);
  const id = bundle.summary.id;
  const shell =
    kept.length > 0 && id !== undefined
      ? html`<p>Open a shell in the kept attempt container (no network, the sandbox user):</p><pre class="cmd">${text(shellJoin(['sandbox-harness', 'shell', id, '--runs-dir', bundle.runsDir]))}</pre><p class="muted">Kept as recorded; <code>sandbox-harness inspect ${text(id)}</code> says whether it still exists (<code>gc</code> removes old ones).</p>`
      : '';
  return html`${table([{ label: 'role' }, { label: 'container' }, { label: 'state' }, { label: 'engine' }], rows)}${shell}`;
}

function changedFiles(a: AttemptView): HtmlValue {
  if (a.changedFiles.length === 0) return a.changedCount ? `${a.changedCount} (not listed)` : 'none';
  const more =
    a.changedCount !== undefined && a.changedCount > a.changedFiles.length
      ? `, and ${a.changedCount - a.changedFiles.length} more`
      : '';
  return html`${joinHtml(
    a.changedFiles.map((f) => html`<code>${text(f)}</code>`),
    ', ',
  )}${more}`;
}

/** One agent's conversation, with the sub-agents it delegated to right after their call. */
function conversationSection(c: ConversationView, named: boolean): Html {
  const out: Html[] = [
    html`<h3>Conversation${named || (c.role && c.role !== 'maker') ? html` (${text(dash(c.role))})` : ''}</h3>`,
  ];
  if (c.system !== undefined) out.push(block('system prompt', c.system, { open: false }));
  if (c.items.length === 0) out.push(html`<p class="muted">No messages.</p>`);
  for (const item of c.items) {
    out.push(conversationItem(item));
    if (item.kind !== 'tool_use') continue;
    for (const d of c.delegations.filter((x) => x.toolUseId === item.id)) {
      out.push(
        html`<details class="block delegation"><summary>${text(`sub-agent conversation: ${dash(d.status)}, ${dash(d.turns)} turns`)}</summary><div class="nested">${joinHtml(d.items.map(conversationItem), '\n')}</div></details>`,
      );
    }
  }
  return joinHtml(out, '\n');
}

function gateHtml(a: AttemptView): Html {
  const g = a.gateRecord;
  if (g) {
    const head = badge(g.ok === undefined ? undefined : g.ok ? 'allowed' : 'rejected');
    const why = a.gate?.message ? html` ${text(a.gate.message)}` : '';
    const offences = g.offences.map(
      (o) =>
        html`<li><code>${text(dash(o.path))}</code> ${text(o.kind ? `(${o.kind})` : '')}: ${text(dash(o.why))}</li>`,
    );
    return html`<p>${head}${why}</p>${offences.length ? html`<ul class="offences">${offences}</ul>` : ''}`;
  }
  return a.gate
    ? html`<p>${badge(a.gate.status)} ${text(dash(a.gate.message))}</p>`
    : html`<p class="muted">No gate decision recorded (the attempt ended before its change was checked).</p>`;
}

function reviewHtml(r: ReviewView): Html {
  const reasons = r.reasons.map((x) => {
    const where = [x.file, x.rule].filter((v): v is string => v !== undefined).join(', ');
    return html`<li>${where ? html`<code>${text(where)}</code>: ` : ''}${text(dash(x.text))}</li>`;
  });
  return html`<div class="review"><p>round ${text(dash(r.round))}: ${badge(r.verdict)} ${text(dash(r.summary))}</p>${reasons.length ? html`<ul>${reasons}</ul>` : ''}</div>`;
}

function attemptSection(a: AttemptView): Html {
  const out: HtmlValue[] = [html`<section class="attempt" id="attempt-${a.n}">`];
  out.push(html`<h2>Attempt ${a.n} ${badge(a.verdict)}</h2>`);
  const tokens =
    a.inputTokens === undefined && a.outputTokens === undefined
      ? '-'
      : `${dash(a.inputTokens)} in, ${dash(a.outputTokens)} out`;
  out.push(
    facts([
      ['agent stopped', text(dash(a.agentStatus))],
      ['turns', text(dash(a.turns))],
      ['tokens', tokens],
      ['duration', formatMs(a.durationMs)],
      ['changed files', changedFiles(a)],
      ['failing test layer', text(dash(a.failingLayer))],
      ...(a.message !== undefined ? ([['note', text(a.message)]] as [string, HtmlValue][]) : []),
    ]),
  );

  if (a.conversations.length === 0) {
    out.push(
      html`<h3>Conversation</h3>`,
      html`<p class="muted">The transcript has no entry for this attempt.</p>`,
    );
  }
  for (const c of a.conversations) out.push(conversationSection(c, a.conversations.length > 1));

  out.push(html`<h3>Gate</h3>`, gateHtml(a));
  out.push(fileBlock('why the change was rejected', a.rejection) ?? '');
  if (a.reviews.length > 0) out.push(html`<h3>Review</h3>`, ...a.reviews.map(reviewHtml));

  out.push(html`<h3>Diff</h3>`);
  out.push(
    a.patch
      ? html`<div class="diff">${fileBlock(`attempts/${a.n}/patch.diff`, a.patch, 'diff')}</div>`
      : html`<p class="muted">No diff: the attempt changed no file.</p>`,
  );

  out.push(html`<h3>Verification</h3>`);
  if (a.verify) {
    out.push(
      html`<p>${badge(a.verify.status)} in a fresh sandbox, ${formatMs(a.verify.durationMs)}${a.verify.exitCode !== undefined ? `, exit code ${a.verify.exitCode}` : ''}${a.verify.message ? html`, ${text(a.verify.message)}` : ''}</p>`,
    );
  }
  if (a.reward) out.push(rewardHtml(a.reward));
  if (a.testResults) out.push(testResultsHtml(a.testResults));
  out.push(
    a.testOutput
      ? html`<div class="test-output">${fileBlock(`test output (attempts/${a.n}/test-output.txt)`, a.testOutput)}</div>`
      : html`<p class="muted">Not verified: there was no allowed change to test.</p>`,
  );
  if (a.feedback !== undefined) out.push(block('feedback for the next attempt', a.feedback));

  out.push(html`<h3>Timeline</h3>`);
  out.push(
    html`<details class="block"><summary>${a.events.length} events</summary>${eventTable(a.events)}</details>`,
  );
  out.push(html`</section>`);
  return joinHtml(out, '\n');
}

export function renderRunPage(bundle: RunBundle, ctx: PageContext): string {
  const s = bundle.summary;
  const name = s.id ?? s.folder;
  const out: HtmlValue[] = [];
  out.push(html`<h1>Run ${text(name)} ${badge(s.outcome)}</h1>`);
  if (s.id !== undefined && s.id !== s.folder) {
    out.push(
      html`<p class="problems">run.json calls this run ${text(s.id)}, but its folder is ${text(s.folder)}.</p>`,
    );
  }
  out.push(problemsBox(bundle.problems) ?? '');
  if (bundle.message !== undefined) out.push(html`<p>${text(bundle.message)}</p>`);
  if (bundle.error) {
    const e = bundle.error;
    out.push(
      html`<p class="problems">${text(`harness error ${dash(e.code)} (${dash(e.category)}): ${dash(e.message)}`)}</p>`,
    );
  }
  const optional: [string, HtmlValue][] = [];
  if (bundle.checker !== undefined) optional.push(['checker', text(bundle.checker)]);
  if (bundle.engine !== undefined) optional.push(['engine', text(bundle.engine)]);
  const rewarded = [...bundle.attempts].reverse().find((a) => a.reward);
  if (rewarded?.reward)
    optional.push(['reward', text(`${rewardLine(rewarded.reward)}, attempt ${rewarded.n}`)]);
  out.push(
    facts([
      ['ticket', text(`${dash(s.task)}${s.title ? `: ${s.title}` : ''}`)],
      ['model', text(`${dash(bundle.provider)} ${bundle.model ?? ''}`)],
      ...optional,
      [
        'catalog',
        text(`${dash(bundle.catalog)}${bundle.catalogHash ? ` (${bundle.catalogHash.slice(0, 12)})` : ''}`),
      ],
      ['image', text(dash(bundle.image))],
      ['started', text(dash(s.startedAt))],
      ['finished', text(dash(bundle.finishedAt))],
      ['duration', formatMs(s.durationMs)],
      ['turns', text(dash(s.turns))],
      ['tokens', text(dash(s.tokens))],
      ['exit code', text(dash(bundle.exitCode))],
      ['keep policy', text(dash(bundle.keep))],
      [
        'applied',
        text(
          bundle.applied === undefined
            ? '-'
            : bundle.applied
              ? 'yes'
              : bundle.applyError
                ? `no: ${bundle.applyError}`
                : 'no',
        ),
      ],
      [
        'test command',
        bundle.testCommand.length > 0
          ? joinHtml(
              bundle.testCommand.map((c) => html`<code>${text(dash(c.command))}</code>`),
              ', ',
            )
          : '-',
      ],
      ['run folder', html`<code>${text(bundle.dir)}</code>`],
    ]),
  );
  if (bundle.attempts.length > 0) {
    out.push(
      html`<p>Attempts: ${joinHtml(
        bundle.attempts.map((a) => html`<a href="#attempt-${a.n}">${a.n}</a> ${badge(a.verdict)}`),
        ' · ',
      )}</p>`,
    );
  }

  // A run that did not pass opens with why (the last attempt's verdict and its account),
  // before the ticket and the baseline's output.
  const last = bundle.attempts[bundle.attempts.length - 1];
  if (s.outcome !== 'ready-for-review' && s.outcome !== 'nothing-to-fix' && last) {
    const why = last.message ?? last.feedback ?? last.gate?.message;
    out.push(
      html`<h2>Why it ended</h2>`,
      html`<p>Last attempt (<a href="#attempt-${last.n}">${last.n}</a>): ${badge(last.verdict)}${last.failingLayer ? text(` (failing layer ${last.failingLayer})`) : ''}</p>`,
      ...(why ? [block('what it was told, or what happened', why.slice(0, 4000), {})] : []),
    );
  }
  out.push(
    html`<h2>Ticket</h2>`,
    bundle.ticket ? fileBlock('ticket.md', bundle.ticket) : html`<p class="muted">No ticket.md.</p>`,
  );
  out.push(html`<h2>Baseline</h2>`);
  const b = bundle.baseline;
  out.push(
    b
      ? html`<p>${b.failing === undefined ? '-' : b.failing ? html`tests fail before any change${b.failingLayer ? html` (layer ${text(b.failingLayer)})` : ''}` : 'tests pass before any change'}, ${formatMs(b.durationMs)}${b.reusedFrom ? text(` (reused from run ${b.reusedFrom})`) : ''}</p>`
      : html`<p class="muted">No baseline recorded.</p>`,
  );
  out.push(fileBlock('baseline test output', bundle.baselineOutput, undefined) ?? '');
  out.push(html`<h2>Containers</h2>`, containersTable(bundle));
  if (bundle.egress.length > 0) out.push(html`<h2>Egress</h2>`, egressTables(bundle));
  out.push(...bundle.attempts.map(attemptSection));
  out.push(html`<h2>Final patch</h2>`);
  out.push(
    bundle.finalPatch
      ? fileBlock('patch.diff (verified)', bundle.finalPatch, 'diff')
      : html`<p class="muted">No verified patch.</p>`,
  );
  out.push(html`<h2>All events</h2>`);
  out.push(
    html`<details class="block"><summary>${bundle.events.length} events</summary>${eventTable(bundle.events)}</details>`,
  );
  return page({ title: `Run ${name}`, up: '../', body: joinHtml(out, '\n'), ...ctx });
}

// ---------------------------------------------------------------------------------------
// An eval

export interface EvalPage {
  summary?: unknown;
  comparison?: unknown;
  problems: string[];
  /** Every trial, linked when its run folder exists (hrefs relative to eval.html). */
  rows: ListRow[];
}

function reportSections(summary: unknown, comparison: unknown): { html?: Html; problem?: string } {
  if (summary === undefined) return { problem: 'no summary.json (the eval did not finish)' };
  try {
    // The report's own renderer escapes every value; a summary of another shape throws.
    const sections = renderReportSections(
      summary as EvalSummary,
      comparison === undefined ? undefined : (comparison as SummaryComparison),
    );
    return { html: joinHtml(sections, '\n') };
  } catch (error) {
    return { problem: `summary.json could not be shown as a report: ${(error as Error).message}` };
  }
}

export function renderEvalPage(data: EvalPage, ctx: PageContext): string {
  const report = reportSections(data.summary, data.comparison);
  const problems = [...data.problems, ...(report.problem ? [report.problem] : [])];
  const body = joinHtml(
    [
      report.html ? '' : html`<h1>Eval</h1>`,
      problemsBox(problems) ?? '',
      report.html ?? '',
      html`<h2>Trials</h2>`,
      data.rows.length ? runsTable(data.rows) : html`<p class="muted">No trial results.</p>`,
    ],
    '\n',
  );
  return page({ title: 'Eval report', up: '', body, ...ctx });
}
