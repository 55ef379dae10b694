/**
 * A run as a portable trajectory: Harbor's Agent Trajectory Interchange Format (ATIF v1.7),
 * so other tools (Harbor's viewers, SFT and RL pipelines) read what an agent did here.
 *
 * Folded from what the run wrote, never re-run: `transcript.json` gives the conversation of
 * every attempt (and each review), `events.jsonl` the time, model and tokens of each model
 * call, and `run.json` the outcome, totals and the prices each model was charged at. Each
 * model answer is one agent step; its tool calls' results are that step's observation, as
 * ATIF asks; a sub-agent's conversation is embedded (v1.7's `subagent_trajectories`, one
 * document) and referenced by its `trajectory_id` from the `delegate` call that started it.
 * A multi-step task's conversations say their step (`extra.step`).
 */
import { costOf, type Price } from '../llm/cost.js';
import type { Message } from '../llm/types.js';
import type { HarnessEvent } from '../agent/events.js';
import type { RunRecord } from './record.js';

export const ATIF_VERSION = 'ATIF-v1.7';

export interface TranscriptEntry {
  attempt: number;
  role: string;
  /** With catalog `agent.steps`: the step whose instruction this conversation answers. */
  step?: string;
  system: string;
  messages: Message[];
  /** How many leading messages came from the recorded run this one was seeded from (no model call of this run). */
  seededMessages?: number;
  delegations?: { toolUseId: string; status: string; turns: number; messages: Message[] }[];
}

export interface AtifToolCall {
  tool_call_id: string;
  function_name: string;
  arguments: Record<string, unknown>;
}

export interface AtifStep {
  step_id: number;
  timestamp?: string;
  source: 'system' | 'user' | 'agent';
  model_name?: string;
  message: string;
  tool_calls?: AtifToolCall[];
  observation?: {
    results: {
      source_call_id?: string;
      content?: string;
      /** v1.7: `trajectory_id` resolves it among the root's `subagent_trajectories`; `session_id` is informational. */
      subagent_trajectory_ref?: {
        trajectory_id: string;
        session_id?: string;
        extra?: Record<string, unknown>;
      }[];
    }[];
  };
  metrics?: {
    prompt_tokens?: number;
    completion_tokens?: number;
    cached_tokens?: number;
    cost_usd?: number | undefined;
  };
  extra?: Record<string, unknown>;
}

export interface AtifTrajectory {
  schema_version: typeof ATIF_VERSION;
  /** Run-scoped: the run's id, shared by the sub-agents embedded in it. */
  session_id?: string;
  /** This document's own id (v1.7): the run's id, or the delegation's under it. */
  trajectory_id: string;
  agent: { name: string; version: string; model_name?: string; extra?: Record<string, unknown> };
  steps: AtifStep[];
  notes?: string;
  final_metrics?: {
    total_prompt_tokens?: number;
    total_completion_tokens?: number;
    total_cached_tokens?: number;
    total_cost_usd?: number;
    total_steps?: number;
    extra?: Record<string, unknown>;
  };
  extra?: Record<string, unknown>;
  /** v1.7: the sub-agents' conversations, each its own trajectory, in this one document. */
  subagent_trajectories?: AtifTrajectory[];
}

function textOf(message: Message): string {
  return message.content
    .filter((block) => block.type === 'text')
    .map((block) => (block.type === 'text' ? block.text : ''))
    .join('\n');
}

/** ATIF wants an object; a model can send anything (kept under `raw`). */
function argumentsOf(input: unknown): Record<string, unknown> {
  if (typeof input === 'object' && input !== null && !Array.isArray(input))
    return input as Record<string, unknown>;
  return { raw: input };
}

/** Which role's model calls in the event log belong to a transcript entry. */
function callsOf(events: readonly HarnessEvent[], entry: TranscriptEntry): HarnessEvent[] {
  const agent = entry.role === 'checker' ? 'checker' : undefined;
  return events.filter(
    (e) => e.kind === 'model_call' && e.isError !== true && e.attempt === entry.attempt && e.agent === agent,
  );
}

function metricsOf(call: HarnessEvent | undefined, prices: Record<string, Price>): AtifStep['metrics'] {
  if (!call?.tokens) return undefined;
  const cached = call.tokens.cacheRead ?? 0;
  const price = call.model ? prices[call.model] : undefined;
  const cost = price
    ? costOf(
        {
          inputTokens: call.tokens.input,
          outputTokens: call.tokens.output,
          ...(call.tokens.cacheRead ? { cacheReadTokens: call.tokens.cacheRead } : {}),
          ...(call.tokens.cacheWrite ? { cacheWriteTokens: call.tokens.cacheWrite } : {}),
        },
        price,
      )
    : undefined;
  return {
    prompt_tokens: call.tokens.input,
    completion_tokens: call.tokens.output,
    ...(cached > 0 ? { cached_tokens: cached } : {}),
    cost_usd: cost,
  };
}

export function runToAtif(
  record: RunRecord,
  transcript: readonly TranscriptEntry[],
  events: readonly HarnessEvent[],
): AtifTrajectory {
  const prices = record.cost?.prices ?? {};
  const steps: AtifStep[] = [];
  const push = (step: Omit<AtifStep, 'step_id'>): void => {
    steps.push({ step_id: steps.length + 1, ...step });
  };
  let cachedTotal = 0;
  for (const entry of transcript) {
    const calls = callsOf(events, entry);
    let call = 0;
    const context = { attempt: entry.attempt, role: entry.role, ...(entry.step ? { step: entry.step } : {}) };
    push({ source: 'system', message: entry.system, extra: context });
    const delegations = new Map((entry.delegations ?? []).map((d) => [d.toolUseId, d]));
    for (let i = 0; i < entry.messages.length; i++) {
      const message = entry.messages[i]!;
      if (message.role === 'user') {
        // Tool results were folded into the agent step before; what is left is what a user said.
        const text = textOf(message);
        if (text !== '') push({ source: 'user', message: text, extra: context });
        continue;
      }
      // A seeded message was the recorded run's, not a model call of this run.
      const seeded = i < (entry.seededMessages ?? 0);
      const event = seeded ? undefined : calls[call++];
      const toolUses = message.content.filter((b) => b.type === 'tool_use');
      const next = entry.messages[i + 1];
      const results =
        next?.role === 'user' ? next.content.filter((b) => b.type === 'tool_result') : ([] as const);
      const metrics = metricsOf(event, prices);
      cachedTotal += metrics?.cached_tokens ?? 0;
      push({
        source: 'agent',
        ...(event?.time ? { timestamp: event.time } : {}),
        model_name:
          event?.model ?? (entry.role === 'checker' ? record.checker?.model : record.provider.model) ?? '',
        message: textOf(message),
        ...(toolUses.length > 0
          ? {
              tool_calls: toolUses.map((b) =>
                b.type === 'tool_use'
                  ? { tool_call_id: b.id, function_name: b.name, arguments: argumentsOf(b.input) }
                  : { tool_call_id: '', function_name: '', arguments: {} },
              ),
            }
          : {}),
        ...(results.length > 0
          ? {
              observation: {
                results: results.map((r) => {
                  if (r.type !== 'tool_result') return {};
                  const delegation = delegations.get(r.toolUseId);
                  return {
                    source_call_id: r.toolUseId,
                    content: r.content,
                    ...(delegation
                      ? {
                          subagent_trajectory_ref: [
                            {
                              trajectory_id: delegationId(record, r.toolUseId),
                              session_id: record.id,
                              extra: { status: delegation.status, turns: delegation.turns },
                            },
                          ],
                        }
                      : {}),
                  };
                }),
              },
            }
          : {}),
        ...(metrics ? { metrics } : {}),
        extra: {
          ...context,
          ...(event?.stopReason ? { stop_reason: event.stopReason } : {}),
          ...(seeded ? { seeded: true } : {}),
        },
      });
    }
  }
  const subagents = transcript.flatMap((entry) =>
    (entry.delegations ?? []).map((d) => delegationTrajectory(record, entry, d)),
  );
  return {
    schema_version: ATIF_VERSION,
    session_id: record.id,
    trajectory_id: record.id,
    agent: {
      name: 'sandbox-harness',
      version: record.harnessVersion,
      model_name: record.provider.model,
      extra: { provider: record.provider.name, ...(record.checker ? { checker: record.checker } : {}) },
    },
    steps,
    notes:
      'One run of sandbox-harness fix: each attempt (and each review) starts with its own system step; tool calls ran in a network-disabled sandbox.',
    final_metrics: {
      total_prompt_tokens: record.tokens.input,
      total_completion_tokens: record.tokens.output,
      ...(cachedTotal > 0 ? { total_cached_tokens: cachedTotal } : {}),
      ...(record.cost ? { total_cost_usd: record.cost.usd } : {}),
      total_steps: steps.length,
      extra: {
        outcome: record.outcome,
        attempts: record.attempts.map((a) => ({ n: a.n, verdict: a.verdict })),
        turns: record.turns,
      },
    },
    extra: {
      ticket: record.ticket,
      catalog: record.catalog,
      startedAt: record.startedAt,
      ...(record.finishedAt ? { finishedAt: record.finishedAt } : {}),
    },
    ...(subagents.length > 0 ? { subagent_trajectories: subagents } : {}),
  };
}

function delegationId(record: RunRecord, toolUseId: string): string {
  return `${record.id}/delegate/${toolUseId}`;
}

/**
 * A sub-agent's conversation as an embedded trajectory: its answers with their tool calls
 * and observations (its model calls' tokens are counted in the run's, not here).
 */
function delegationTrajectory(
  record: RunRecord,
  entry: TranscriptEntry,
  delegation: NonNullable<TranscriptEntry['delegations']>[number],
): AtifTrajectory {
  const steps: AtifStep[] = [];
  const context = { attempt: entry.attempt, role: 'delegate', ...(entry.step ? { step: entry.step } : {}) };
  for (let i = 0; i < delegation.messages.length; i++) {
    const message = delegation.messages[i]!;
    const step_id = steps.length + 1;
    if (message.role === 'user') {
      const text = textOf(message);
      if (text !== '') steps.push({ step_id, source: 'user', message: text, extra: context });
      continue;
    }
    const toolUses = message.content.flatMap((b) => (b.type === 'tool_use' ? [b] : []));
    const next = delegation.messages[i + 1];
    const results =
      next?.role === 'user' ? next.content.flatMap((b) => (b.type === 'tool_result' ? [b] : [])) : [];
    steps.push({
      step_id,
      source: 'agent',
      message: textOf(message),
      ...(toolUses.length > 0
        ? {
            tool_calls: toolUses.map((b) => ({
              tool_call_id: b.id,
              function_name: b.name,
              arguments: argumentsOf(b.input),
            })),
          }
        : {}),
      ...(results.length > 0
        ? {
            observation: {
              results: results.map((r) => ({ source_call_id: r.toolUseId, content: r.content })),
            },
          }
        : {}),
      extra: context,
    });
  }
  return {
    schema_version: ATIF_VERSION,
    session_id: record.id,
    trajectory_id: delegationId(record, delegation.toolUseId),
    agent: { name: 'sandbox-harness-delegate', version: record.harnessVersion },
    steps,
    final_metrics: {
      total_steps: steps.length,
      extra: { status: delegation.status, turns: delegation.turns },
    },
  };
}
