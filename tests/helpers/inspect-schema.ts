/**
 * Inspect AI's eval log (the JSON log format, version 2), written from Inspect's documented
 * models (`inspect_ai.log.EvalLog`, `EvalSpec`, `EvalPlan`, `EvalResults`, `EvalStats`,
 * `EvalSample`, `ChatMessage*`, `ModelOutput`, `ModelUsage`, `Score`, and the `model`, `tool`,
 * `info` and `score` events) independently of our exporter, so an export that drifts from the
 * format fails here. Inspect's pydantic models ignore unknown fields on read; these schemas
 * are strict where a misspelt field would silently be lost (messages, usage, scores, events),
 * and require what Inspect requires.
 */
import { z } from 'zod';

const utc = z.iso.datetime({ offset: true });
const json = z.record(z.string(), z.unknown());

const usage = z.strictObject({
  input_tokens: z.number().int().nonnegative(),
  output_tokens: z.number().int().nonnegative(),
  total_tokens: z.number().int().nonnegative(),
  input_tokens_cache_write: z.number().int().nonnegative().nullish(),
  input_tokens_cache_read: z.number().int().nonnegative().nullish(),
  reasoning_tokens: z.number().int().nonnegative().nullish(),
  total_cost: z.number().nonnegative().nullish(),
});

const content = z.union([
  z.string(),
  z.array(z.object({ type: z.enum(['text', 'reasoning', 'image', 'audio', 'video', 'data']) }).loose()),
]);

const toolCall = z.strictObject({
  id: z.string().min(1),
  function: z.string().min(1),
  arguments: json,
  parse_error: z.string().nullish(),
  type: z.literal('function').optional(),
});

const base = {
  id: z.string().nullish(),
  content,
  source: z.enum(['input', 'generate']).nullish(),
  metadata: json.nullish(),
};

const TOOL_ERROR_TYPES = [
  'parsing',
  'timeout',
  'unicode_decode',
  'permission',
  'file_not_found',
  'is_a_directory',
  'limit',
  'approval',
  'unknown',
  'output_limit',
] as const;

export const inspectMessageSchema = z.discriminatedUnion('role', [
  z.strictObject({ ...base, role: z.literal('system') }),
  z.strictObject({ ...base, role: z.literal('user'), tool_call_id: z.array(z.string()).nullish() }),
  z.strictObject({
    ...base,
    role: z.literal('assistant'),
    tool_calls: z.array(toolCall).nullish(),
    model: z.string().nullish(),
  }),
  z.strictObject({
    ...base,
    role: z.literal('tool'),
    tool_call_id: z.string().nullish(),
    function: z.string().nullish(),
    error: z.strictObject({ type: z.enum(TOOL_ERROR_TYPES), message: z.string() }).nullish(),
  }),
]);

const STOP_REASONS = [
  'stop',
  'max_tokens',
  'model_length',
  'tool_calls',
  'content_filter',
  'unknown',
] as const;

const modelOutput = z.object({
  model: z.string(),
  choices: z.array(
    z.object({
      message: inspectMessageSchema.refine((m) => m.role === 'assistant', 'expected an assistant message'),
      stop_reason: z.enum(STOP_REASONS),
    }),
  ),
  usage: usage.nullish(),
  time: z.number().nullish(),
  metadata: json.nullish(),
  error: z.string().nullish(),
});

const scoreValue = z.union([
  z.string(),
  z.number(),
  z.boolean(),
  z.array(z.union([z.string(), z.number(), z.boolean()])),
  z.record(z.string(), z.union([z.string(), z.number(), z.boolean(), z.null()])),
]);

const score = z.strictObject({
  value: scoreValue,
  answer: z.string().nullish(),
  explanation: z.string().nullish(),
  metadata: json.nullish(),
  history: z.array(z.unknown()).optional(),
});

const baseEvent = {
  uuid: z.string().nullish(),
  span_id: z.string().nullish(),
  timestamp: utc,
  working_start: z.number().nonnegative(),
  metadata: json.nullish(),
  pending: z.boolean().nullish(),
};

const event = z.discriminatedUnion('event', [
  z.strictObject({
    ...baseEvent,
    event: z.literal('model'),
    model: z.string(),
    role: z.string().nullish(),
    input: z.array(inspectMessageSchema),
    tools: z.array(z.object({ name: z.string(), description: z.string() }).loose()),
    tool_choice: z.union([z.enum(['auto', 'any', 'none']), z.object({ name: z.string() })]),
    config: json,
    output: modelOutput,
    retries: z.number().int().nullish(),
    error: z.string().nullish(),
    cache: z.enum(['read', 'write']).nullish(),
    completed: utc.nullish(),
    working_time: z.number().nullish(),
  }),
  z.strictObject({
    ...baseEvent,
    event: z.literal('tool'),
    type: z.literal('function'),
    id: z.string().min(1),
    function: z.string(),
    arguments: json,
    result: z.union([z.string(), z.number(), z.boolean(), z.array(z.unknown())]),
    truncated: z.tuple([z.number(), z.number()]).nullish(),
    error: z.strictObject({ type: z.enum(TOOL_ERROR_TYPES), message: z.string() }).nullish(),
    completed: utc.nullish(),
    working_time: z.number().nullish(),
    agent: z.string().nullish(),
    failed: z.boolean().nullish(),
    message_id: z.string().nullish(),
  }),
  z.strictObject({ ...baseEvent, event: z.literal('info'), source: z.string().nullish(), data: z.unknown() }),
  z.strictObject({
    ...baseEvent,
    event: z.literal('score'),
    score,
    target: z.union([z.string(), z.array(z.string())]).nullish(),
    intermediate: z.boolean(),
  }),
]);

const evalError = z.strictObject({ message: z.string(), traceback: z.string(), traceback_ansi: z.string() });

export const inspectSampleSchema = z
  .object({
    id: z.union([z.string().min(1), z.number().int()]),
    epoch: z.number().int().positive(),
    input: z.union([z.string(), z.array(inspectMessageSchema)]),
    choices: z.array(z.string()).nullish(),
    target: z.union([z.string(), z.array(z.string())]),
    messages: z.array(inspectMessageSchema),
    output: modelOutput,
    scores: z.record(z.string(), score).nullish(),
    metadata: json,
    store: json.optional(),
    events: z.array(event),
    model_usage: z.record(z.string(), usage),
    started_at: utc.nullish(),
    completed_at: utc.nullish(),
    total_time: z.number().nonnegative().nullish(),
    working_time: z.number().nonnegative().nullish(),
    uuid: z.string().nullish(),
    error: evalError.nullish(),
    attachments: z.record(z.string(), z.string()).optional(),
    limit: z
      .strictObject({
        type: z.enum(['context', 'time', 'working', 'message', 'token', 'cost', 'operator', 'custom']),
        limit: z.number(),
      })
      .nullish(),
  })
  .loose();

const metric = z.object({ name: z.string(), value: z.number(), params: json.optional() }).loose();

export const inspectLogSchema = z
  .object({
    version: z.literal(2),
    status: z.enum(['started', 'success', 'cancelled', 'error']),
    eval: z
      .object({
        eval_set_id: z.string().nullish(),
        eval_id: z.string().optional(),
        run_id: z.string().optional(),
        created: utc,
        task: z.string().min(1),
        task_id: z.string().optional(),
        task_version: z.union([z.number().int(), z.string()]).optional(),
        task_file: z.string().nullish(),
        solver: z.string().nullish(),
        dataset: z
          .object({
            name: z.string().nullish(),
            location: z.string().nullish(),
            samples: z.number().int().nonnegative().nullish(),
            sample_ids: z.array(z.union([z.string(), z.number()])).nullish(),
            shuffled: z.boolean().nullish(),
          })
          .loose(),
        sandbox: z.object({ type: z.string(), config: z.unknown() }).nullish(),
        model: z.string().regex(/^[^/]+\/.+$/, 'expected <provider>/<model>'),
        config: z.object({ epochs: z.number().int().positive().nullish() }).loose(),
        packages: z.record(z.string(), z.string()).optional(),
        metadata: json.nullish(),
      })
      .loose(),
    plan: z
      .object({
        name: z.string().optional(),
        steps: z.array(z.object({ solver: z.string(), params: json.optional() }).loose()).optional(),
        config: json.optional(),
      })
      .loose(),
    results: z
      .object({
        total_samples: z.number().int().nonnegative(),
        completed_samples: z.number().int().nonnegative(),
        scores: z.array(
          z
            .object({
              name: z.string(),
              scorer: z.string(),
              reducer: z.string().nullish(),
              scored_samples: z.number().int().nonnegative().nullish(),
              unscored_samples: z.number().int().nonnegative().nullish(),
              params: json.optional(),
              metrics: z.record(z.string(), metric),
            })
            .loose(),
        ),
      })
      .loose()
      .nullish(),
    stats: z
      .object({
        started_at: z.union([utc, z.literal('')]),
        completed_at: z.union([utc, z.literal('')]),
        model_usage: z.record(z.string(), usage),
      })
      .loose(),
    error: evalError.nullish(),
    samples: z.array(inspectSampleSchema).nullish(),
  })
  .loose()
  .superRefine((log, ctx) => {
    // Inspect keys a sample by (id, epoch): two with the same pair overwrite each other.
    const seen = new Set<string>();
    for (const sample of log.samples ?? []) {
      const key = `${sample.id}#${sample.epoch}`;
      if (seen.has(key)) ctx.addIssue({ code: 'custom', message: `duplicate sample ${key}` });
      seen.add(key);
    }
    // Every tool message answers a tool call made before it in the conversation.
    for (const sample of log.samples ?? []) {
      const calls = new Set<string>();
      for (const message of sample.messages) {
        if (message.role === 'assistant') for (const c of message.tool_calls ?? []) calls.add(c.id);
        if (message.role === 'tool' && message.tool_call_id && !calls.has(message.tool_call_id))
          ctx.addIssue({ code: 'custom', message: `tool message for unknown call ${message.tool_call_id}` });
      }
    }
  });

export type InspectLogParsed = z.infer<typeof inspectLogSchema>;
