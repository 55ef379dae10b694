/**
 * Runs and evals as Inspect AI eval logs (the JSON flavour of Inspect's log format, version 2),
 * so Inspect's viewer, its log API and its dataframes read what the harness did.
 *
 * The mapping is where the two fit: a `fix` run is a log with one sample; an eval is one log
 * whose samples are its trials, a task being a sample id and a trial its epoch (1-based), so
 * Inspect's per-epoch views and reducers apply. A sample's messages are the implementer's
 * attempts in order (each attempt starts with its own system message); its events are one
 * `model` event per model call (with the messages new since the previous call as `input`, not
 * the whole history Inspect itself logs), one `tool` event per tool call, one `info` event per
 * attempt verdict and one `score` event. Its score `verified` is `C` when the trial's category
 * is `ready-for-review`, `I` otherwise; a trial the harness could not score (error,
 * infrastructure, interrupted) is a sample with an `error` and no score, as in Inspect.
 *
 * Folded from what was written, never re-run; the files it reads are data (see trajectory.ts).
 */
import { costOf, type Price } from '../llm/cost.js';
import type { Message } from '../llm/types.js';
import type { HarnessEvent } from '../agent/events.js';
import { categoryOf, PASSING_CATEGORY, UNSCORED_CATEGORIES, type TrialCategory } from '../outcomes.js';
import type { TranscriptEntry } from './atif.js';
import type { RunRecord } from './record.js';

export const INSPECT_LOG_VERSION = 2;
/** Inspect's CORRECT / INCORRECT score values: its `accuracy` metric reads them. */
const CORRECT = 'C';
const INCORRECT = 'I';
export const SCORER = 'verified';

type Json = Record<string, unknown>;

export interface InspectUsage {
  input_tokens: number;
  output_tokens: number;
  total_tokens: number;
  input_tokens_cache_read?: number | undefined;
  input_tokens_cache_write?: number | undefined;
  total_cost?: number | undefined;
}

export interface InspectToolCall {
  id: string;
  function: string;
  arguments: Json;
  type: 'function';
}

export type InspectMessage =
  | { role: 'system'; content: string; source?: 'input'; metadata?: Json }
  | { role: 'user'; content: string; source?: 'input'; metadata?: Json }
  | {
      role: 'assistant';
      content: string;
      tool_calls?: InspectToolCall[];
      model?: string;
      source: 'generate';
      metadata?: Json;
    }
  | {
      role: 'tool';
      content: string;
      tool_call_id: string;
      function?: string;
      error?: { type: 'unknown'; message: string };
    };

export interface InspectScore {
  value: string;
  answer?: string | undefined;
  explanation?: string | undefined;
  metadata?: Json | undefined;
}

export interface InspectSample {
  id: string;
  epoch: number;
  input: string;
  target: string;
  messages: InspectMessage[];
  output: {
    model: string;
    choices: { message: InspectMessage; stop_reason: string }[];
    usage?: InspectUsage;
  };
  scores?: Record<string, InspectScore>;
  metadata: Json;
  events: Json[];
  model_usage: Record<string, InspectUsage>;
  started_at?: string;
  completed_at?: string;
  total_time?: number;
  uuid?: string;
  error?: { message: string; traceback: string; traceback_ansi: string };
  limit?: { type: 'cost' | 'message' | 'time' | 'token'; limit: number };
}

export interface InspectEvalLog {
  version: typeof INSPECT_LOG_VERSION;
  status: 'started' | 'success' | 'cancelled' | 'error';
  eval: Json & { created: string; task: string; model: string; dataset: Json; config: Json };
  plan: { name: string; steps: { solver: string; params: Json }[]; config: Json };
  results?: {
    total_samples: number;
    completed_samples: number;
    scores: {
      name: string;
      scorer: string;
      scored_samples: number;
      unscored_samples: number;
      params: Json;
      metrics: Record<string, { name: string; value: number; params: Json }>;
    }[];
  };
  stats: { started_at: string; completed_at: string; model_usage: Record<string, InspectUsage> };
  samples: InspectSample[];
}

/**
 * What an eval's results line says of a trial (the fields of `evals/types.ts`'s `TrialResult`
 * read here; named here so this folder does not reach up into `evals/`).
 */
export interface TrialResult {
  taskId: string;
  trial: number;
  category: TrialCategory;
  startedAt: string;
  finishedAt: string;
  durationMs: number;
  runId?: string | undefined;
  provider?: string | undefined;
  model?: string | undefined;
  error?: string | undefined;
  costUsd?: number | undefined;
  seededFrom?: { runId: string; attempts: number } | undefined;
}

/** What a sample knows of its run beyond the run's own files (an eval's trial). */
export interface SampleContext {
  id: string;
  epoch: number;
  category: TrialCategory;
  /** An eval trial's error line (why it is unscored, or what a must-not-touch rule found). */
  error?: string;
  trial?: TrialResult;
}

function textOf(message: Message): string {
  return message.content
    .filter((block) => block.type === 'text')
    .map((block) => (block.type === 'text' ? block.text : ''))
    .join('\n');
}

function argumentsOf(input: unknown): Json {
  if (typeof input === 'object' && input !== null && !Array.isArray(input)) return input as Json;
  return { raw: input };
}

function stopReasonOf(reason: string | undefined, toolCalls: boolean): string {
  if (reason === 'max_tokens') return 'max_tokens';
  if (reason === 'tool_use' || toolCalls) return 'tool_calls';
  if (reason === 'end_turn') return 'stop';
  return 'unknown';
}

function seconds(ms: number): number {
  return Math.round(ms) / 1000;
}

/** One of our messages as Inspect's: tool results become one `tool` message each. */
function toInspect(message: Message, model: string, toolNames: Map<string, string>): InspectMessage[] {
  if (message.role === 'assistant') {
    const calls = message.content.flatMap((b) =>
      b.type === 'tool_use'
        ? [{ id: b.id, function: b.name, arguments: argumentsOf(b.input), type: 'function' as const }]
        : [],
    );
    for (const call of calls) toolNames.set(call.id, call.function);
    return [
      {
        role: 'assistant',
        content: textOf(message),
        ...(calls.length > 0 ? { tool_calls: calls } : {}),
        ...(model ? { model } : {}),
        source: 'generate',
      },
    ];
  }
  const out: InspectMessage[] = [];
  for (const block of message.content) {
    if (block.type !== 'tool_result') continue;
    const name = toolNames.get(block.toolUseId);
    out.push({
      role: 'tool',
      content: block.content,
      tool_call_id: block.toolUseId,
      ...(name ? { function: name } : {}),
      ...(block.isError
        ? { error: { type: 'unknown' as const, message: block.content.slice(0, 2000) } }
        : {}),
    });
  }
  const text = textOf(message);
  if (text !== '') out.push({ role: 'user', content: text, source: 'input' });
  return out;
}

function usageOf(
  tokens: HarnessEvent['tokens'] | undefined,
  price: Price | undefined,
): InspectUsage | undefined {
  if (!tokens) return undefined;
  return {
    input_tokens: tokens.input,
    output_tokens: tokens.output,
    total_tokens: tokens.input + tokens.output,
    ...(tokens.cacheRead ? { input_tokens_cache_read: tokens.cacheRead } : {}),
    ...(tokens.cacheWrite ? { input_tokens_cache_write: tokens.cacheWrite } : {}),
    ...(price
      ? {
          total_cost: costOf(
            {
              inputTokens: tokens.input,
              outputTokens: tokens.output,
              ...(tokens.cacheRead ? { cacheReadTokens: tokens.cacheRead } : {}),
              ...(tokens.cacheWrite ? { cacheWriteTokens: tokens.cacheWrite } : {}),
            },
            price,
          ),
        }
      : {}),
  };
}

function addUsage(into: Record<string, InspectUsage>, model: string, usage: InspectUsage | undefined): void {
  if (!usage) return;
  const was = into[model] ?? { input_tokens: 0, output_tokens: 0, total_tokens: 0 };
  const sum = (a: number | undefined, b: number | undefined) =>
    a === undefined && b === undefined ? undefined : (a ?? 0) + (b ?? 0);
  const cacheRead = sum(was.input_tokens_cache_read, usage.input_tokens_cache_read);
  const cacheWrite = sum(was.input_tokens_cache_write, usage.input_tokens_cache_write);
  const cost = sum(was.total_cost, usage.total_cost);
  into[model] = {
    input_tokens: was.input_tokens + usage.input_tokens,
    output_tokens: was.output_tokens + usage.output_tokens,
    total_tokens: was.total_tokens + usage.total_tokens,
    input_tokens_cache_read: cacheRead,
    input_tokens_cache_write: cacheWrite,
    total_cost: cost,
  };
}

/** The run's category as a trial would count it (a lone `fix` run has no results line). */
export function categoryOfRun(record: RunRecord): TrialCategory | undefined {
  if (record.outcome === 'running') return undefined;
  return categoryOf(record.outcome, record.attempts[record.attempts.length - 1]?.verdict);
}

/** One run as one Inspect sample. */
export function runToInspectSample(
  record: RunRecord,
  transcript: readonly TranscriptEntry[],
  events: readonly HarnessEvent[],
  context: SampleContext,
): InspectSample {
  const prices = record.cost?.prices ?? {};
  const started = Date.parse(record.startedAt);
  const at = (time: string | undefined) => {
    const ms = time ? Date.parse(time) : Number.NaN;
    return Number.isNaN(ms) || Number.isNaN(started) ? 0 : Math.max(0, seconds(ms - started));
  };
  const messages: InspectMessage[] = [];
  const sampleEvents: Json[] = [];
  const modelUsage: Record<string, InspectUsage> = {};
  const toolNames = new Map<string, string>();
  const toolInputs = new Map<string, Json>();
  const toolCalls = events.filter((e) => e.kind === 'tool_call' && e.agent === undefined);
  let input = '';
  let lastAssistant: InspectMessage | undefined;
  let lastStop = 'unknown';
  for (const entry of transcript) {
    const checker = entry.role === 'checker';
    const agent = checker ? 'checker' : undefined;
    const calls = events.filter(
      (e) =>
        e.kind === 'model_call' && e.isError !== true && e.attempt === entry.attempt && e.agent === agent,
    );
    const defaultModel = (checker ? record.checker?.model : record.provider.model) ?? '';
    const system: InspectMessage = {
      role: 'system',
      content: entry.system,
      source: 'input',
      metadata: { attempt: entry.attempt, role: entry.role },
    };
    // The sample's conversation is the implementer's; a review is its own conversation, kept in events.
    if (!checker) messages.push(system);
    let pending: InspectMessage[] = [system];
    let call = 0;
    const seededCount = entry.seededMessages ?? 0;
    for (const [index, message] of entry.messages.entries()) {
      const converted = toInspect(message, '', toolNames);
      // Messages taken from a seed run are the sample's conversation, but no event of this run.
      const seeded = index < seededCount;
      if (seeded) {
        const marked = converted.map((m) =>
          m.role === 'assistant' ? { ...m, metadata: { seeded: true } } : m,
        );
        if (!checker) messages.push(...marked);
        pending.push(...marked);
        if (input === '' && message.role === 'user') input = textOf(message);
        continue;
      }
      if (message.role === 'user') {
        if (input === '' && !checker) input = textOf(message);
        if (!checker) messages.push(...converted);
        pending.push(...converted);
        for (const block of message.content) {
          if (block.type !== 'tool_result') continue;
          const use = toolInputs.get(block.toolUseId);
          const timing = toolCalls.find((e) => e.toolUseId === block.toolUseId);
          sampleEvents.push({
            event: 'tool',
            timestamp: timing?.time ?? record.startedAt,
            working_start: at(timing?.time),
            type: 'function',
            id: block.toolUseId,
            function: toolNames.get(block.toolUseId) ?? '',
            arguments: use ?? {},
            result: block.content,
            ...(block.isError ? { error: { type: 'unknown', message: block.content.slice(0, 2000) } } : {}),
            ...(timing?.durationMs !== undefined ? { working_time: seconds(timing.durationMs) } : {}),
            metadata: { attempt: entry.attempt, role: entry.role },
          });
        }
        continue;
      }
      const event = calls[call++];
      const model = event?.model ?? defaultModel;
      const [assistant] = toInspect(message, model, toolNames);
      for (const b of message.content) if (b.type === 'tool_use') toolInputs.set(b.id, argumentsOf(b.input));
      if (!checker) messages.push(assistant!);
      const hasCalls = message.content.some((b) => b.type === 'tool_use');
      const stop = stopReasonOf(event?.stopReason, hasCalls);
      const usage = usageOf(event?.tokens, model ? prices[model] : undefined);
      addUsage(modelUsage, model, usage);
      sampleEvents.push({
        event: 'model',
        timestamp: event?.time ?? record.startedAt,
        working_start: at(event?.time),
        model,
        role: checker ? 'checker' : 'implementer',
        input: pending,
        tools: [],
        tool_choice: 'auto',
        config: {},
        output: {
          model,
          choices: [{ message: assistant!, stop_reason: stop }],
          ...(usage ? { usage } : {}),
        },
        metadata: { attempt: entry.attempt, role: entry.role, ...(event?.turn ? { turn: event.turn } : {}) },
      });
      pending = [];
      if (!checker) {
        lastAssistant = assistant;
        lastStop = stop;
      }
    }
  }
  for (const attempt of record.attempts) {
    sampleEvents.push({
      event: 'info',
      timestamp: record.finishedAt ?? record.startedAt,
      working_start: at(record.finishedAt),
      source: 'sandbox-harness',
      data: {
        attempt: attempt.n,
        verdict: attempt.verdict,
        changedFiles: attempt.changedFiles,
        ...(attempt.feedback ? { feedback: attempt.feedback.slice(-4000) } : {}),
      },
    });
  }
  const category = context.category;
  const unscored = UNSCORED_CATEGORIES.has(category);
  const score: InspectScore | undefined = unscored
    ? undefined
    : {
        value: category === PASSING_CATEGORY ? CORRECT : INCORRECT,
        answer: category,
        ...((context.error ?? record.message) ? { explanation: context.error ?? record.message } : {}),
        metadata: {
          outcome: record.outcome,
          attempts: record.attempts.map((a) => ({ n: a.n, verdict: a.verdict })),
        },
      };
  if (score) {
    sampleEvents.push({
      event: 'score',
      timestamp: record.finishedAt ?? record.startedAt,
      working_start: at(record.finishedAt),
      score,
      target: '',
      intermediate: false,
    });
  }
  const limit =
    category === 'budget' && record.cost?.limitUsd !== undefined
      ? { type: 'cost' as const, limit: record.cost.limitUsd }
      : category === 'timeout' && record.durationMs !== undefined
        ? { type: 'time' as const, limit: seconds(record.durationMs) }
        : undefined;
  const errorText = context.error ?? record.error?.message ?? record.message ?? category;
  const totalMs =
    record.durationMs ??
    (record.finishedAt ? Date.parse(record.finishedAt) - Date.parse(record.startedAt) : undefined);
  return {
    id: context.id,
    epoch: context.epoch,
    input,
    target: '',
    messages,
    output: {
      model: record.provider.model,
      choices: lastAssistant ? [{ message: lastAssistant, stop_reason: lastStop }] : [],
      ...(modelUsage[record.provider.model] ? { usage: modelUsage[record.provider.model] } : {}),
    },
    ...(score ? { scores: { [SCORER]: score } } : {}),
    metadata: {
      runId: record.id,
      outcome: record.outcome,
      category,
      ticket: record.ticket,
      catalog: record.catalog,
      attempts: record.attempts.length,
      turns: record.turns,
      ...(record.continuedFrom ? { continuedFrom: record.continuedFrom } : {}),
      ...(record.cost ? { costUsd: record.cost.usd } : {}),
      ...(record.engine ? { engine: record.engine } : {}),
      ...(record.runtime ? { runtime: record.runtime } : {}),
    },
    events: sampleEvents,
    model_usage: modelUsage,
    started_at: record.startedAt,
    ...(record.finishedAt ? { completed_at: record.finishedAt } : {}),
    ...(totalMs !== undefined && !Number.isNaN(totalMs) ? { total_time: seconds(totalMs) } : {}),
    uuid: record.id,
    ...(unscored ? { error: { message: errorText, traceback: '', traceback_ansi: '' } } : {}),
    ...(limit ? { limit } : {}),
  };
}

/** A trial that never became a run (its engine or its configuration failed first). */
export function trialWithoutRun(trial: TrialResult, id: string, epoch: number): InspectSample {
  const unscored = UNSCORED_CATEGORIES.has(trial.category);
  return {
    id,
    epoch,
    input: '',
    target: '',
    messages: [],
    output: { model: trial.model ?? '', choices: [] },
    ...(unscored
      ? {}
      : {
          scores: {
            [SCORER]: {
              value: trial.category === PASSING_CATEGORY ? CORRECT : INCORRECT,
              answer: trial.category,
              ...(trial.error ? { explanation: trial.error } : {}),
            },
          },
        }),
    metadata: { category: trial.category, note: 'no run record for this trial' },
    events: [],
    model_usage: {},
    started_at: trial.startedAt,
    completed_at: trial.finishedAt,
    total_time: seconds(trial.durationMs),
    ...(unscored
      ? { error: { message: trial.error ?? trial.category, traceback: '', traceback_ansi: '' } }
      : {}),
  };
}

function resultsOf(samples: readonly InspectSample[]): NonNullable<InspectEvalLog['results']> {
  const scored = samples.filter((s) => s.scores?.[SCORER]);
  const correct = scored.filter((s) => s.scores![SCORER]!.value === CORRECT).length;
  return {
    total_samples: samples.length,
    completed_samples: samples.filter((s) => !s.error).length,
    scores: [
      {
        name: SCORER,
        scorer: SCORER,
        scored_samples: scored.length,
        unscored_samples: samples.length - scored.length,
        params: {},
        metrics: {
          accuracy: {
            name: 'accuracy',
            value: scored.length === 0 ? 0 : correct / scored.length,
            params: {},
          },
        },
      },
    ],
  };
}

function totalUsage(samples: readonly InspectSample[]): Record<string, InspectUsage> {
  const total: Record<string, InspectUsage> = {};
  for (const sample of samples)
    for (const [model, usage] of Object.entries(sample.model_usage)) addUsage(total, model, usage);
  return total;
}

export interface LogSpec {
  /** The log's run id: the run's, or the eval's output folder name. */
  runId: string;
  task: string;
  taskFile?: string;
  created: string;
  completedAt?: string;
  model: string;
  harnessVersion: string;
  epochs: number;
  status: InspectEvalLog['status'];
  sampleIds: string[];
  metadata: Json;
}

export function inspectLog(spec: LogSpec, samples: InspectSample[]): InspectEvalLog {
  return {
    version: INSPECT_LOG_VERSION,
    status: spec.status,
    eval: {
      eval_id: spec.runId,
      run_id: spec.runId,
      created: spec.created,
      task: spec.task,
      task_id: spec.task,
      task_version: 0,
      ...(spec.taskFile ? { task_file: spec.taskFile } : {}),
      task_attribs: {},
      task_args: {},
      solver: 'sandbox-harness/fix',
      dataset: {
        name: spec.task,
        ...(spec.taskFile ? { location: spec.taskFile } : {}),
        samples: spec.sampleIds.length,
        sample_ids: spec.sampleIds,
        shuffled: false,
      },
      sandbox: { type: 'docker', config: null },
      model: spec.model,
      model_generate_config: {},
      model_args: {},
      config: { epochs: spec.epochs },
      packages: { 'sandbox-harness': spec.harnessVersion },
      metadata: spec.metadata,
      scorers: [{ name: SCORER, options: {}, metrics: [{ name: 'accuracy', options: {} }], metadata: {} }],
    },
    plan: {
      name: 'plan',
      steps: [{ solver: 'sandbox-harness/fix', params: {} }],
      config: {},
    },
    results: resultsOf(samples),
    stats: {
      started_at: spec.created,
      completed_at: spec.completedAt ?? '',
      model_usage: totalUsage(samples),
    },
    samples,
  };
}

/** Inspect's model names are `<provider>/<model>`. */
export function modelName(provider: string | undefined, model: string | undefined): string {
  return `${provider ?? 'unknown'}/${model ?? 'unknown'}`;
}

/** A lone `fix` run as a log of one sample. */
export function runToInspect(
  record: RunRecord,
  transcript: readonly TranscriptEntry[],
  events: readonly HarnessEvent[],
): InspectEvalLog {
  const id = record.ticket.id ?? record.id;
  const category = categoryOfRun(record);
  const sample = runToInspectSample(record, transcript, events, {
    id,
    epoch: 1,
    category: category ?? 'interrupted',
  });
  return inspectLog(
    {
      runId: record.id,
      task: `sandbox-harness/${record.catalog.name}`,
      taskFile: record.catalog.file,
      created: record.startedAt,
      ...(record.finishedAt ? { completedAt: record.finishedAt } : {}),
      model: modelName(record.provider.name, record.provider.model),
      harnessVersion: record.harnessVersion,
      epochs: 1,
      status:
        record.outcome === 'running' ? 'started' : record.outcome === 'interrupted' ? 'cancelled' : 'success',
      sampleIds: [id],
      metadata: { kind: 'fix', runId: record.id },
    },
    [sample],
  );
}

export interface EvalFacts {
  /** The eval's output folder name (the log's run id). */
  folder: string;
  suite: { name: string; file?: string | undefined };
  n: number;
  startedAt?: string;
  finishedAt?: string;
  harnessVersion?: string;
  /** summary.json was written: the eval ran to its end. */
  finished: boolean;
}

export interface TrialRun {
  record: RunRecord;
  transcript: readonly TranscriptEntry[];
  events: readonly HarnessEvent[];
}

/** An eval as one log: a sample per trial, the task as the sample id, the trial as its epoch. */
export function evalToInspect(
  facts: EvalFacts,
  trials: readonly TrialResult[],
  runOf: (trial: TrialResult) => TrialRun | undefined,
): InspectEvalLog {
  const ordered = [...trials].sort((a, b) => a.trial - b.trial || a.taskId.localeCompare(b.taskId, 'en'));
  const samples = ordered.map((trial) => {
    const run = runOf(trial);
    const epoch = trial.trial + 1;
    if (!run) return trialWithoutRun(trial, trial.taskId, epoch);
    const sample = runToInspectSample(run.record, run.transcript, run.events, {
      id: trial.taskId,
      epoch,
      category: trial.category,
      ...(trial.error ? { error: trial.error } : {}),
      trial,
    });
    sample.metadata = {
      ...sample.metadata,
      trial: trial.trial,
      costUsd: trial.costUsd,
      ...(trial.seededFrom ? { seededFrom: trial.seededFrom } : {}),
    };
    return sample;
  });
  const models = [...new Set(trials.map((t) => modelName(t.provider, t.model)))];
  const ids = [...new Set(ordered.map((t) => t.taskId))];
  const created = facts.startedAt ?? ordered[0]?.startedAt ?? new Date(0).toISOString();
  return inspectLog(
    {
      runId: facts.folder,
      task: facts.suite.name,
      ...(facts.suite.file ? { taskFile: facts.suite.file } : {}),
      created,
      ...(facts.finishedAt ? { completedAt: facts.finishedAt } : {}),
      model: models.length === 1 ? models[0]! : models.length === 0 ? 'unknown/unknown' : 'mixed/mixed',
      harnessVersion: facts.harnessVersion ?? 'unknown',
      epochs: facts.n,
      status: !facts.finished
        ? 'started'
        : trials.some((t) => t.category === 'interrupted')
          ? 'cancelled'
          : 'success',
      sampleIds: ids,
      metadata: { kind: 'eval', ...(models.length > 1 ? { models } : {}) },
    },
    samples,
  );
}
