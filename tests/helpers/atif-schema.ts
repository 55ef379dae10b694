/**
 * Harbor's Agent Trajectory Interchange Format, v1.7, written from its RFC
 * (rfcs/0001-trajectory-format.md in the Harbor project) independently of our exporter,
 * so an export that drifts from the format fails here. v1.7 over v1.4: `trajectory_id` (the
 * document's id; required and unique on embedded sub-agents), `session_id` optional and
 * run-scoped, `subagent_trajectories` embedded in the root, a sub-agent reference resolved
 * by `trajectory_id`, `extra` on tool calls and observation results. Strict objects: ATIF's models forbid
 * unknown fields, and custom data belongs in `extra`.
 */
import { z } from 'zod';

const extra = z.record(z.string(), z.unknown()).optional();

const toolCall = z.strictObject({
  tool_call_id: z.string().min(1),
  function_name: z.string().min(1),
  arguments: z.record(z.string(), z.unknown()),
  extra,
});

const subagentRef = z.strictObject({
  trajectory_id: z.string().min(1),
  session_id: z.string().min(1).optional(),
  trajectory_path: z.string().optional(),
  extra,
});

const observationResult = z.strictObject({
  source_call_id: z.string().optional(),
  content: z.string().optional(),
  subagent_trajectory_ref: z.array(subagentRef).optional(),
  extra,
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

interface Trajectory {
  schema_version: string;
  trajectory_id?: string | undefined;
  steps: Array<z.infer<typeof step>>;
  subagent_trajectories?: Trajectory[] | undefined;
  [key: string]: unknown;
}

const trajectory: z.ZodType<Trajectory> = z.lazy(() =>
  z
    .strictObject({
      schema_version: z.literal('ATIF-v1.7'),
      session_id: z.string().min(1).optional(),
      trajectory_id: z.string().min(1).optional(),
      agent: z.strictObject({
        name: z.string().min(1),
        version: z.string().min(1),
        model_name: z.string().optional(),
        tool_definitions: z.array(z.record(z.string(), z.unknown())).optional(),
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
      continued_trajectory_ref: z.string().optional(),
      subagent_trajectories: z.array(trajectory).optional(),
      extra,
    })
    .superRefine((t, ctx) => {
      t.steps.forEach((s, i) => {
        if (s.step_id !== i + 1)
          ctx.addIssue({ code: 'custom', message: `step ${i} has step_id ${s.step_id}` });
      });
      // Embedded sub-agents: each has its own trajectory_id, unique among them; every reference resolves.
      const ids = (t.subagent_trajectories ?? []).map((sub) => sub.trajectory_id);
      if (ids.some((id) => id === undefined))
        ctx.addIssue({ code: 'custom', message: 'an embedded sub-agent without trajectory_id' });
      if (new Set(ids).size !== ids.length)
        ctx.addIssue({ code: 'custom', message: 'two embedded sub-agents share a trajectory_id' });
      for (const s of t.steps)
        for (const r of s.observation?.results ?? [])
          for (const ref of r.subagent_trajectory_ref ?? [])
            if (!ids.includes(ref.trajectory_id))
              ctx.addIssue({
                code: 'custom',
                message: `reference to no embedded sub-agent: ${ref.trajectory_id}`,
              });
    }),
);

/** A root trajectory: it has its own trajectory_id. */
export const atifTrajectorySchema = trajectory.refine((t) => t.trajectory_id !== undefined, {
  message: 'the root trajectory has no trajectory_id',
});
