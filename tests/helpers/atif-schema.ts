/**
 * Harbor's Agent Trajectory Interchange Format, v1.4, written from its RFC
 * (docs/rfcs/0001-trajectory-format.md in the Harbor project) independently of our exporter,
 * so an export that drifts from the format fails here. Strict objects: ATIF's models forbid
 * unknown fields, and custom data belongs in `extra`.
 */
import { z } from 'zod';

const extra = z.record(z.string(), z.unknown()).optional();

const toolCall = z.strictObject({
  tool_call_id: z.string().min(1),
  function_name: z.string().min(1),
  arguments: z.record(z.string(), z.unknown()),
});

const subagentRef = z.strictObject({
  session_id: z.string().min(1),
  trajectory_path: z.string().optional(),
  extra,
});

const observationResult = z.strictObject({
  source_call_id: z.string().optional(),
  content: z.string().optional(),
  subagent_trajectory_ref: z.array(subagentRef).optional(),
});

const metrics = z.strictObject({
  prompt_tokens: z.number().int().nonnegative().optional(),
  completion_tokens: z.number().int().nonnegative().optional(),
  cached_tokens: z.number().int().nonnegative().optional(),
  cost_usd: z.number().nonnegative().optional(),
  prompt_token_ids: z.array(z.number().int()).optional(),
  completion_token_ids: z.array(z.number().int()).optional(),
  logprobs: z.array(z.number()).optional(),
  extra,
});

const step = z
  .strictObject({
    step_id: z.number().int().positive(),
    timestamp: z.iso.datetime().optional(),
    source: z.enum(['system', 'user', 'agent']),
    model_name: z.string().optional(),
    reasoning_effort: z.union([z.string(), z.number()]).optional(),
    message: z.string(),
    reasoning_content: z.string().optional(),
    tool_calls: z.array(toolCall).optional(),
    observation: z.strictObject({ results: z.array(observationResult) }).optional(),
    metrics: metrics.optional(),
    extra,
  })
  .superRefine((s, ctx) => {
    // Agent-only fields (the RFC: "only applicable when source is agent").
    for (const key of [
      'model_name',
      'reasoning_effort',
      'reasoning_content',
      'tool_calls',
      'metrics',
    ] as const) {
      if (s.source !== 'agent' && s[key] !== undefined)
        ctx.addIssue({ code: 'custom', message: `${key} on a ${s.source} step` });
    }
    // Every observation of a tool call names a call of the same step.
    const ids = new Set((s.tool_calls ?? []).map((c) => c.tool_call_id));
    for (const r of s.observation?.results ?? []) {
      if (r.source_call_id !== undefined && s.source === 'agent' && !ids.has(r.source_call_id))
        ctx.addIssue({ code: 'custom', message: `observation for unknown call ${r.source_call_id}` });
    }
  });

export const atifTrajectorySchema = z
  .strictObject({
    schema_version: z.string().regex(/^ATIF-v1\.[0-9]+$/),
    session_id: z.string().min(1),
    agent: z.strictObject({
      name: z.string().min(1),
      version: z.string().min(1),
      model_name: z.string().optional(),
      extra,
    }),
    steps: z.array(step).min(1),
    notes: z.string().optional(),
    final_metrics: z
      .strictObject({
        total_prompt_tokens: z.number().int().nonnegative().optional(),
        total_completion_tokens: z.number().int().nonnegative().optional(),
        total_cached_tokens: z.number().int().nonnegative().optional(),
        total_cost_usd: z.number().nonnegative().optional(),
        total_steps: z.number().int().nonnegative().optional(),
        extra,
      })
      .optional(),
    extra,
  })
  .superRefine((t, ctx) => {
    t.steps.forEach((s, i) => {
      if (s.step_id !== i + 1)
        ctx.addIssue({ code: 'custom', message: `step ${i} has step_id ${s.step_id}` });
    });
  });
