/**
 * The run bundle: everything one run folder says, read defensively and put in the shape the
 * run page shows (per attempt: conversations, gate, reviews, diff, verification output,
 * timings, containers). Files that are missing, links, or unreadable become a note in
 * `problems`, never an exception: a page over a damaged run still shows what is left.
 * Records are read field by field (not with the harness's own schema), so a record of an
 * older or newer harness still shows whatever it has.
 */
import { join } from 'node:path';
import type { HarnessEvent } from '../agent/events.js';
import {
  asArray,
  asBoolean,
  asNumber,
  asObject,
  asString,
  asStrings,
  parseJson,
  parseJsonLines,
  showJson,
  type JsonObject,
} from './json.js';
import { listFolders, readConfined } from './safe-fs.js';
import {
  LIMITS,
  readRunRecord,
  runParts,
  runsDirOf,
  slugOf,
  summariseRecord,
  type RunSummary,
  type ViewSource,
} from './source.js';

import { parseStoredResults, type StoredResults } from '../test-results/stored.js';
import { foldRun } from '../runs/journal.js';

export interface FileText {
  text: string;
  bytes: number;
  /** Bytes the viewer left out of the middle (0: the whole file is in `text`). */
  omitted: number;
}

/** An event of the run's log as read back: the harness's fields, each possibly missing. */
export type ViewEvent = {
  [K in Exclude<keyof HarnessEvent, 'kind' | 'tokens'>]?: HarnessEvent[K] | undefined;
} & {
  kind: string;
  tokens?: { input?: number | undefined; output?: number | undefined } | undefined;
};

export interface ContainerView {
  role?: string | undefined;
  id?: string | undefined;
  kept?: boolean | undefined;
  /** Which Docker engine holds it, when the run says (a fleet). */
  engine?: string | undefined;
}

export type ConversationItem =
  | { kind: 'text'; role: string; turn: number; text: string }
  | { kind: 'tool_use'; role: string; turn: number; id: string; name: string; input: unknown }
  | {
      kind: 'tool_result';
      role: string;
      turn: number;
      toolUseId: string;
      /** Name of the tool_use it answers. */
      tool?: string | undefined;
      content: string;
      isError?: boolean | undefined;
      /** From the event log: the recorded facts of the call. */
      exitCode?: number | undefined;
      durationMs?: number | undefined;
    }
  | { kind: 'other'; role: string; turn: number; raw: string };

/** A sub-agent's conversation, started by a `delegate` call of the conversation it sits in. */
export interface DelegationView {
  toolUseId: string;
  status?: string | undefined;
  turns?: number | undefined;
  items: ConversationItem[];
}

/** One agent's conversation in an attempt (the maker, a checker, ...). */
export interface ConversationView {
  /** `maker`, `checker`, ... as recorded; absent in older transcripts. */
  role?: string | undefined;
  system?: string | undefined;
  items: ConversationItem[];
  delegations: DelegationView[];
}

export interface ReviewView {
  round?: number | undefined;
  verdict?: string | undefined;
  summary?: string | undefined;
  reasons: { file?: string | undefined; rule?: string | undefined; text?: string | undefined }[];
}

/** What the verifier's reward file said (catalog `agent.reward`, Harbor tasks), as recorded. */
export interface RewardView {
  /** `read` or `refused`, as recorded. */
  status?: string | undefined;
  score?: number | undefined;
  /** reward.json's named values, in the recorded order (the names are data). */
  values: [string, number][];
  file?: string | undefined;
  reason?: string | undefined;
}

export interface GateView {
  ok?: boolean | undefined;
  offences: { path?: string | undefined; kind?: string | undefined; why?: string | undefined }[];
}

export interface AttemptView {
  n: number;
  verdict?: string | undefined;
  agentStatus?: string | undefined;
  turns?: number | undefined;
  inputTokens?: number | undefined;
  outputTokens?: number | undefined;
  durationMs?: number | undefined;
  changedFiles: string[];
  /** How many files changed when `changedFiles` was cut short. */
  changedCount?: number | undefined;
  failingLayer?: string | undefined;
  feedback?: string | undefined;
  /** The attempt's own one-line account, when recorded. */
  message?: string | undefined;
  containers: ContainerView[];
  /** Empty when the transcript has no entry for this attempt. */
  conversations: ConversationView[];
  /** The gate's decision as recorded on the attempt (offending paths and why). */
  gateRecord?: GateView | undefined;
  /** The gate's event (status and message), for records without `gateRecord`. */
  gate?: ViewEvent | undefined;
  reviews: ReviewView[];
  verify?: ViewEvent | undefined;
  rejection?: FileText | undefined;
  patch?: FileText | undefined;
  testOutput?: FileText | undefined;
  /** Per-test results of the verification (attempts/<n>/test-results.json), when it had a report. */
  testResults?: StoredResults | undefined;
  /** The verifier's reward, when the catalog reads one. */
  reward?: RewardView | undefined;
  events: ViewEvent[];
}

export interface RunBundle {
  summary: RunSummary;
  /** Absolute path of the run folder (for the reader; never used to read). */
  dir: string;
  /** Absolute folder of runs, for `sandbox-harness shell <id> --runs-dir <dir>`. */
  runsDir: string;
  message?: string | undefined;
  /** What went wrong when the harness itself failed. */
  error?:
    { code?: string | undefined; category?: string | undefined; message?: string | undefined } | undefined;
  provider?: string | undefined;
  model?: string | undefined;
  checker?: string | undefined;
  engine?: string | undefined;
  image?: string | undefined;
  catalog?: string | undefined;
  catalogHash?: string | undefined;
  repoDir?: string | undefined;
  keep?: string | undefined;
  applied?: boolean | undefined;
  applyError?: string | undefined;
  finishedAt?: string | undefined;
  exitCode?: number | undefined;
  harnessVersion?: string | undefined;
  baseline?:
    | {
        failing?: boolean | undefined;
        failingLayer?: string | undefined;
        durationMs?: number | undefined;
        reusedFrom?: string | undefined;
      }
    | undefined;
  testCommand: { name?: string | undefined; command?: string | undefined }[];
  containers: ContainerView[];
  /** Each egress sandbox's proxy log (JSON lines, read as data), by role. */
  egress: { role?: string | undefined; log?: FileText | undefined }[];
  ticket?: FileText | undefined;
  baselineOutput?: FileText | undefined;
  finalPatch?: FileText | undefined;
  attempts: AttemptView[];
  events: ViewEvent[];
  problems: string[];
}

/** Attempt folders beyond this are not shown: no real run has them. */
const MAX_ATTEMPTS = 200;

function objects(value: unknown): JsonObject[] {
  return asArray(value)
    .map(asObject)
    .filter((o): o is JsonObject => o !== undefined);
}

function containersOf(value: unknown): ContainerView[] {
  return objects(value).map((c) => ({
    role: asString(c.role),
    id: asString(c.id),
    kept: asBoolean(c.kept),
    engine: asString(c.engine),
  }));
}

function eventOf(e: JsonObject): ViewEvent {
  const tokens = asObject(e.tokens);
  return {
    kind: asString(e.kind) ?? '?',
    time: asString(e.time),
    attempt: asNumber(e.attempt),
    turn: asNumber(e.turn),
    tool: asString(e.tool),
    toolUseId: asString(e.toolUseId),
    durationMs: asNumber(e.durationMs),
    exitCode: asNumber(e.exitCode),
    isError: asBoolean(e.isError),
    status: asString(e.status),
    message: asString(e.message),
    ...(tokens ? { tokens: { input: asNumber(tokens.input), output: asNumber(tokens.output) } } : {}),
    stopReason: asString(e.stopReason),
    agent: asString(e.agent),
    parent: asString(e.parent),
  };
}

/**
 * One agent's messages as a flat list of what was said and done, turn by turn. `events`
 * are that agent's own: a sub-agent's tool ids repeat the main agent's (t1, t2, ...).
 */
function conversationOf(messages: unknown, events: ViewEvent[]): ConversationItem[] {
  const items: ConversationItem[] = [];
  const toolNames = new Map<string, string>();
  let turn = 0;
  for (const value of asArray(messages)) {
    const message = asObject(value);
    const role = asString(message?.role) ?? '?';
    if (role === 'assistant') turn++;
    const content = message?.content;
    // Some providers' transcripts could hold a plain string; show it as text.
    if (typeof content === 'string') {
      items.push({ kind: 'text', role, turn, text: content });
      continue;
    }
    for (const raw of asArray(content)) {
      const b = asObject(raw);
      const type = asString(b?.type);
      if (b && type === 'text') {
        items.push({ kind: 'text', role, turn, text: asString(b.text) ?? showJson(b.text) });
      } else if (b && type === 'tool_use') {
        const id = asString(b.id) ?? '';
        const name = asString(b.name) ?? '?';
        toolNames.set(id, name);
        items.push({ kind: 'tool_use', role, turn, id, name, input: b.input });
      } else if (b && type === 'tool_result') {
        const toolUseId = asString(b.toolUseId) ?? asString(b.tool_use_id) ?? '';
        const fact = events.find((e) => e.kind === 'tool_call' && e.toolUseId === toolUseId);
        items.push({
          kind: 'tool_result',
          role,
          turn,
          toolUseId,
          tool: toolNames.get(toolUseId),
          content: showJson(b.content),
          isError: asBoolean(b.isError),
          exitCode: fact?.exitCode,
          durationMs: fact?.durationMs,
        });
      } else {
        items.push({ kind: 'other', role, turn, raw: showJson(raw) });
      }
    }
  }
  return items;
}

function conversationViewOf(entry: JsonObject, attemptEvents: ViewEvent[]): ConversationView {
  return {
    role: asString(entry.role),
    system: asString(entry.system),
    items: conversationOf(
      entry.messages,
      attemptEvents.filter((e) => e.parent === undefined),
    ),
    delegations: objects(entry.delegations).map((d) => {
      const toolUseId = asString(d.toolUseId) ?? '';
      return {
        toolUseId,
        status: asString(d.status),
        turns: asNumber(d.turns),
        items: conversationOf(
          d.messages,
          attemptEvents.filter((e) => e.parent === toolUseId),
        ),
      };
    }),
  };
}

/** Named values shown at most; reward files have at most 100, a tampered record may have more. */
const MAX_REWARD_VALUES = 100;

function rewardOf(value: unknown): RewardView | undefined {
  const r = asObject(value);
  if (!r) return undefined;
  const values = Object.entries(asObject(r.values) ?? {})
    .flatMap(([name, v]): [string, number][] => {
      const n = asNumber(v);
      return n === undefined ? [] : [[name, n]];
    })
    .slice(0, MAX_REWARD_VALUES);
  return {
    status: asString(r.status),
    score: asNumber(r.score),
    values,
    file: asString(r.file),
    reason: asString(r.reason),
  };
}

function gateOf(value: unknown): GateView | undefined {
  const gate = asObject(value);
  if (!gate) return undefined;
  return {
    ok: asBoolean(gate.ok),
    offences: objects(gate.offences).map((o) => ({
      path: asString(o.path),
      kind: asString(o.kind),
      why: asString(o.why),
    })),
  };
}

function reviewsOf(value: unknown): ReviewView[] {
  return objects(value).map((r) => ({
    round: asNumber(r.round),
    verdict: asString(r.verdict),
    summary: asString(r.summary),
    reasons: objects(r.reasons).map((x) => ({
      file: asString(x.file),
      rule: asString(x.rule),
      text: asString(x.text),
    })),
  }));
}

export async function loadRunBundle(source: ViewSource, folder: string): Promise<RunBundle> {
  const base = runParts(source, folder);
  const problems: string[] = [];
  const readText = async (parts: string[], limit = LIMITS.text): Promise<FileText | undefined> => {
    const read = await readConfined(source.root, [...base, ...parts], limit);
    if (read.status === 'refused') problems.push(`${parts.join('/')} not read: ${read.reason}`);
    if (read.status !== 'ok') return undefined;
    return { text: read.text, bytes: read.bytes, omitted: read.omitted };
  };

  const testResultsOf = async (parts: string[]): Promise<{ testResults?: StoredResults }> => {
    const read = await readText(parts, LIMITS.results);
    if (!read) return {};
    const testResults = read.omitted === 0 ? parseStoredResults(read.text) : undefined;
    if (!testResults)
      problems.push(`${parts.join('/')} not shown: not the per-test results the harness writes`);
    return testResults ? { testResults } : {};
  };

  const recordRead = await readRunRecord(source, folder);
  const record: JsonObject = 'record' in recordRead ? recordRead.record : {};
  const summary: RunSummary =
    'record' in recordRead
      ? summariseRecord(folder, record)
      : { folder, slug: slugOf(folder), problem: recordRead.problem };
  if ('problem' in recordRead) problems.push(recordRead.problem);

  const eventsText = await readText(['events.jsonl'], LIMITS.events);
  const parsedEvents = parseJsonLines(eventsText?.text ?? '');
  if (parsedEvents.bad > 0)
    problems.push(`events.jsonl: ${parsedEvents.bad} line(s) that are not JSON objects`);
  const events = parsedEvents.values.map(eventOf);

  const transcriptText = await readText(['transcript.json'], LIMITS.transcript);
  let transcript: JsonObject[] = [];
  if (transcriptText && transcriptText.omitted > 0) {
    problems.push(`transcript.json is over ${LIMITS.transcript} bytes: the conversation is not shown`);
  } else if (transcriptText) {
    const parsed = parseJson(transcriptText.text);
    if (!parsed.ok) problems.push(`transcript.json is not valid JSON: ${parsed.error}`);
    else transcript = objects(parsed.value);
  }

  // The run's history comes from its journal when the log has one (a run still going shows
  // the attempt under way; run.json is written as each attempt ends); an older run's log
  // has no run_start, and its run.json is the history.
  const journaled =
    eventsText && eventsText.omitted === 0 ? historyOfEvents(parsedEvents.values, problems) : undefined;
  const recordAttempts = objects(journaled?.attempts ?? record.attempts);
  const numbers = new Set<number>();
  for (const a of recordAttempts) {
    const n = asNumber(a.n);
    if (n !== undefined && Number.isInteger(n) && n > 0) numbers.add(n);
  }
  for (const t of transcript) {
    const n = asNumber(t.attempt);
    if (n !== undefined && Number.isInteger(n) && n > 0) numbers.add(n);
  }
  for (const name of await listFolders(source.root, [...base, 'attempts'])) {
    if (/^[1-9]\d{0,3}$/.test(name)) numbers.add(Number(name));
  }
  const sorted = [...numbers].sort((a, b) => a - b);
  if (sorted.length > MAX_ATTEMPTS)
    problems.push(`${sorted.length} attempts; only the first ${MAX_ATTEMPTS} are shown`);

  const attempts: AttemptView[] = [];
  for (const n of sorted.slice(0, MAX_ATTEMPTS)) {
    const a = recordAttempts.find((r) => asNumber(r.n) === n) ?? {};
    const attemptEvents = events.filter((e) => e.attempt === n);
    const dir = ['attempts', String(n)];
    const gateRecord = gateOf(a.gate);
    const reward = rewardOf(a.reward);
    attempts.push({
      n,
      verdict: asString(a.verdict),
      agentStatus: asString(a.agentStop) ?? asString(a.agentStatus),
      turns: asNumber(a.turns),
      inputTokens: asNumber(a.inputTokens),
      outputTokens: asNumber(a.outputTokens),
      durationMs: asNumber(a.durationMs),
      changedFiles: asStrings(a.changedFiles),
      changedCount: asNumber(a.changedCount),
      failingLayer: asString(a.failingLayer),
      feedback: asString(a.feedback),
      message: asString(a.message),
      containers: containersOf(a.containers),
      conversations: transcript
        .filter((entry) => asNumber(entry.attempt) === n)
        .map((entry) => conversationViewOf(entry, attemptEvents)),
      ...(gateRecord ? { gateRecord } : {}),
      gate: attemptEvents.find((e) => e.kind === 'gate' && e.parent === undefined),
      reviews: reviewsOf(a.reviews),
      verify: attemptEvents.find((e) => e.kind === 'verify'),
      rejection: await readText([...dir, 'rejection.txt']),
      patch: await readText([...dir, 'patch.diff']),
      testOutput: await readText([...dir, 'test-output.txt']),
      ...(await testResultsOf([...dir, 'test-results.json'])),
      ...(reward ? { reward } : {}),
      events: attemptEvents,
    });
  }

  const image = asObject(record.image);
  const catalog = asObject(record.catalog);
  const provider = asObject(record.provider);
  const checker = asObject(record.checker);
  const baseline = asObject(record.baseline);
  const error = asObject(record.error);
  return {
    summary,
    dir: join(source.root, ...base),
    runsDir: runsDirOf(source),
    message: asString(record.message),
    ...(error
      ? {
          error: {
            code: asString(error.code),
            category: asString(error.category),
            message: asString(error.message),
          },
        }
      : {}),
    provider: asString(provider?.name),
    model: asString(provider?.model),
    checker: checker
      ? [asString(checker.name), asString(checker.model)].filter(Boolean).join(' ')
      : undefined,
    engine: asString(record.engine),
    image: asString(image?.tag),
    catalog: asString(catalog?.name),
    catalogHash: asString(catalog?.hash),
    repoDir: asString(record.repoDir),
    keep: asString(record.keep),
    applied: asBoolean(record.applied),
    applyError: asString(record.applyError),
    finishedAt: asString(record.finishedAt),
    exitCode: asNumber(record.exitCode),
    harnessVersion: asString(record.harnessVersion),
    ...(baseline
      ? {
          baseline: {
            failing: asBoolean(baseline.failing),
            failingLayer: asString(baseline.failingLayer),
            durationMs: asNumber(baseline.durationMs),
            reusedFrom: asString(baseline.reusedFrom),
          },
        }
      : {}),
    testCommand: objects(record.testCommand).map((c) => ({
      name: asString(c.name),
      command: asString(c.command),
    })),
    containers: containersOf(record.containers),
    egress: await Promise.all(
      objects(record.containers)
        .map((c) => ({ role: asString(c.role), file: asString(asObject(c.egress)?.file) }))
        .filter((c) => c.file !== undefined && /^egress\/[A-Za-z0-9_.-]+\.jsonl$/.test(c.file))
        .map(async (c) => ({ role: c.role, log: await readText(c.file!.split('/')) })),
    ),
    ticket: await readText(['ticket.md']),
    baselineOutput: await readText(['baseline-test-output.txt']),
    finalPatch: await readText(['patch.diff']),
    attempts,
    events,
    problems,
  };
}

/**
 * The run record folded from its logged events, or undefined (no journal in the log, or one
 * that cannot be folded: a note in `problems`, and the page shows run.json's account).
 */
function historyOfEvents(values: readonly JsonObject[], problems: string[]): JsonObject | undefined {
  const logged = values.filter((v): v is JsonObject & { kind: string } => typeof v.kind === 'string');
  if (!logged.some((e) => e.kind === 'run_start')) return undefined;
  try {
    const folded = foldRun(logged);
    return folded ? asObject(JSON.parse(JSON.stringify(folded))) : undefined;
  } catch (error) {
    problems.push(`events.jsonl: the run's journal could not be read (${String(error)}); run.json is shown`);
    return undefined;
  }
}
