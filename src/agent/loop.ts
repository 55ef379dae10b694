/**
 * The agent loop: ask the model, run the tools it asks for inside the sandbox, hand the
 * results back, until it answers without a tool call or a limit is reached. The loop knows
 * nothing about Docker, tickets or catalogs; its whole world is a `Sandbox`, a
 * `ModelProvider` and a `ToolRegistry`.
 *
 * Sub-agents are this same loop run again from inside a `delegate` tool call: an empty
 * conversation, the same sandbox, signal and system prompt, the tools minus `delegate`, and
 * the parent's `LoopBudget`, so a sub-agent's turns and tokens count against the parent's
 * limits. Only its final text goes back to the parent; its messages never enter the
 * parent's history.
 */
import { DiskBudgetExceeded, Interrupted, SandboxDead } from '../errors.js';
import type { LoopStop } from '../outcomes.js';
import { estimateTokensForText } from '../llm/tokens.js';
import type {
  AssistantMessage,
  Completion,
  Message,
  ModelProvider,
  ToolDefinition,
  ToolResultBlock,
  ToolUseBlock,
  Usage,
} from '../llm/types.js';
import type { Sandbox } from '../sandbox/types.js';
import { nestedSink, type EventSink } from './events.js';
import { trimHistory } from './history.js';
import type { ToolRegistry } from './tools/tool-registry.js';
import type { DelegateCapability } from './tools/types.js';

export { trimHistory } from './history.js';

/** Longest tool error an event carries; the whole text stays in the transcript. */
export const TOOL_ERROR_SUMMARY_CHARS = 300;

/** A tool error as one capped line (the terminal escapes it; the event log is JSON). */
export function errorSummary(content: string): string {
  const line = content.replace(/\s+/g, ' ').trim();
  return line.length > TOOL_ERROR_SUMMARY_CHARS ? `${line.slice(0, TOOL_ERROR_SUMMARY_CHARS - 1)}…` : line;
}

export interface LoopLimits {
  /** Model calls allowed in this loop. */
  maxTurns: number;
  /** Input + output tokens this loop may spend (the caller passes what is left of the run's budget). */
  tokenBudget?: number;
  /** Wall clock for this attempt; in-flight model and tool calls are aborted when it passes. */
  attemptDeadlineMs?: number;
  /** The run's cost limit: true once it is reached, and no further model call may start. */
  costExceeded?: () => boolean;
}

export interface SubAgentOptions {
  /**
   * The provider sub-agents call: the registry's provider for role `delegate`, so that a
   * cassette replays their turns from their own queue and `--record` files them there.
   */
  provider: ModelProvider;
}

export interface AgentLoopOptions {
  sandbox: Sandbox;
  provider: ModelProvider;
  tools: ToolRegistry;
  system: string;
  firstUserMessage: string;
  limits: LoopLimits;
  events: EventSink;
  signal?: AbortSignal;
  /** The model's context window; when set, old exchanges are trimmed before it fills up. */
  contextWindowTokens?: number;
  /** Output tokens per model call. */
  maxTokens?: number;
  /** Attached to every event, for logs that span attempts. */
  attempt?: number;
  /** Lets the `delegate` tool start sub-agents; without it, `delegate` answers that it is unavailable. */
  subAgent?: SubAgentOptions | undefined;
  /**
   * Called as a tool call starts (the progress line shows `running: <command>` during a long
   * command). Not an event: events carry facts about calls, never their inputs.
   */
  onToolStart?: (call: { name: string; input: unknown; turn: number }) => void;
  /**
   * The conversation is appended here as it happens, so a caller keeps it even when the
   * loop ends with an error; the result carries the same array.
   */
  messages?: Message[];
}

export interface AgentLoopResult {
  status: LoopStop;
  /** Model calls made, its sub-agents' included. */
  turns: number;
  /** Tokens spent, its sub-agents' included. */
  usage: Usage;
  /** The full conversation, untrimmed, for the run record. */
  messages: Message[];
  /** Text of the model's last message. */
  finalText: string;
  /** The sub-agents' conversations, kept out of `messages`, for the run record. */
  delegations: Delegation[];
  /** What stopped the sandbox, for `disk-budget` and `sandbox-stopped`. */
  sandboxError?: DiskBudgetExceeded | SandboxDead;
}

export interface Delegation {
  /** The `delegate` call that started it. */
  toolUseId: string;
  status: LoopStop;
  turns: number;
  messages: Message[];
}

/**
 * The model calls and tokens a loop may spend, as one object that the loop and every
 * sub-agent it starts draw from, so that delegating cannot multiply the limits.
 */
export class LoopBudget {
  turns = 0;
  readonly usage: Usage = { inputTokens: 0, outputTokens: 0 };

  constructor(private readonly limits: Pick<LoopLimits, 'maxTurns' | 'tokenBudget' | 'costExceeded'>) {}

  /** The limit that forbids another model call, if one does. */
  exhausted(): 'max-turns' | 'token-budget' | 'budget' | undefined {
    if (this.limits.costExceeded?.()) return 'budget';
    if (this.turns >= this.limits.maxTurns) return 'max-turns';
    const spent = this.usage.inputTokens + this.usage.outputTokens;
    if (this.limits.tokenBudget !== undefined && spent >= this.limits.tokenBudget) return 'token-budget';
    return undefined;
  }

  spend(usage: Usage): void {
    this.turns++;
    this.usage.inputTokens += usage.inputTokens;
    this.usage.outputTokens += usage.outputTokens;
  }
}

export const DEFAULT_MAX_OUTPUT_TOKENS = 8_192;
/** Trimming starts at this share of the window: token estimates are rough. */
const CONTEXT_FILL_RATIO = 0.8;

const CUT_OFF_NUDGE =
  'Your last reply was cut off at the output limit. Continue; if you are writing a large file, write it in smaller pieces.';

/** Waits for `promise` but gives up as soon as `signal` aborts, even if the callee ignores the signal. */
function abortable<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) {
    promise.catch(() => {});
    return Promise.reject(new Interrupted('aborted'));
  }
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => reject(new Interrupted('aborted'));
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(error);
      },
    );
  });
}

function textOf(message: AssistantMessage | undefined): string {
  if (!message) return '';
  return message.content
    .filter((block) => block.type === 'text')
    .map((block) => block.text)
    .join('\n')
    .trim();
}

export function runAgentLoop(options: AgentLoopOptions): Promise<AgentLoopResult> {
  return runLoop(options, new LoopBudget(options.limits));
}

/**
 * Why the loop stopped, as a value: the stop's name, and for a stopped sandbox the error
 * that says what stopped it. A step returns one to end the loop (or nothing to go on).
 */
export interface Stop {
  status: LoopStop;
  sandboxError?: DiskBudgetExceeded | SandboxDead;
}

/** One loop's state, shared by its steps. */
interface LoopState {
  options: AgentLoopOptions;
  budget: LoopBudget;
  maxTokens: number;
  definitions: ToolDefinition[];
  messages: Message[];
  /** This loop's own spend plus its sub-agents' tokens. */
  usage: Usage;
  turns: number;
  delegatedTurns: number;
  delegations: Delegation[];
  /** Messages the last trim dropped (an event is emitted only when it changes). */
  lastDropped: number;
  /** Tokens the history may take, when the context window is known. */
  historyBudget?: number;
  /** The caller's signal, the attempt deadline: every model and tool call is given it. */
  signal: AbortSignal;
  deadlinePassed: () => boolean;
  /** Fields attached to every event. */
  base: { attempt?: number };
}

/** The loop: step until a step stops it; a stop that arrives as an error becomes a value. */
async function runLoop(options: AgentLoopOptions, budget: LoopBudget): Promise<AgentLoopResult> {
  const { state, close } = startLoop(options, budget);
  let stop: Stop | undefined;
  try {
    while (!stop) stop = await step(state);
  } catch (error) {
    stop = stopOfError(state, error);
    if (!stop) throw error;
  } finally {
    close();
    options.events.emit({
      ...state.base,
      kind: 'loop_end',
      // 'error': the loop ended with an error it throws on.
      status: stop?.status ?? 'error',
      turn: state.turns,
      tokens: { input: state.usage.inputTokens, output: state.usage.outputTokens },
    });
  }
  const lastAssistant = [...state.messages]
    .reverse()
    .find((message): message is AssistantMessage => message.role === 'assistant');
  return {
    status: stop.status,
    turns: state.turns + state.delegatedTurns,
    usage: state.usage,
    messages: state.messages,
    finalText: textOf(lastAssistant),
    delegations: state.delegations,
    ...(stop.sandboxError ? { sandboxError: stop.sandboxError } : {}),
  };
}

/** The loop's state, its signal (the caller's plus the attempt deadline), and how to let them go. */
function startLoop(options: AgentLoopOptions, budget: LoopBudget): { state: LoopState; close: () => void } {
  const maxTokens = options.maxTokens ?? DEFAULT_MAX_OUTPUT_TOKENS;
  const definitions: ToolDefinition[] = options.tools.definitions();
  const messages: Message[] = options.messages ?? [];
  messages.push({ role: 'user', content: [{ type: 'text', text: options.firstUserMessage }] });

  const controller = new AbortController();
  const forwardAbort = (): void => controller.abort(options.signal?.reason);
  if (options.signal?.aborted) controller.abort(options.signal.reason);
  options.signal?.addEventListener('abort', forwardAbort, { once: true });
  let deadlinePassed = false;
  const deadlineMs = options.limits.attemptDeadlineMs;
  const deadline =
    deadlineMs === undefined
      ? undefined
      : setTimeout(() => {
          deadlinePassed = true;
          controller.abort(new Interrupted('attempt deadline passed'));
        }, deadlineMs);

  const state: LoopState = {
    options,
    budget,
    maxTokens,
    definitions,
    messages,
    usage: { inputTokens: 0, outputTokens: 0 },
    turns: 0,
    delegatedTurns: 0,
    delegations: [],
    lastDropped: 0,
    ...(options.contextWindowTokens === undefined
      ? {}
      : {
          historyBudget: Math.max(
            1_000,
            Math.floor(options.contextWindowTokens * CONTEXT_FILL_RATIO) -
              estimateTokensForText(options.system) -
              estimateTokensForText(JSON.stringify(definitions)) -
              maxTokens,
          ),
        }),
    signal: controller.signal,
    deadlinePassed: () => deadlinePassed,
    base: options.attempt === undefined ? {} : { attempt: options.attempt },
  };
  const close = (): void => {
    if (deadline !== undefined) clearTimeout(deadline);
    options.signal?.removeEventListener('abort', forwardAbort);
  };
  return { state, close };
}

/**
 * One step: unless a limit forbids it, ask the model (query) and run the tools it asks for
 * (execute). Returns the stop when this step ends the loop.
 */
async function step(state: LoopState): Promise<Stop | undefined> {
  if (state.signal.aborted) throw new Interrupted('aborted');
  const exhausted = state.budget.exhausted();
  if (exhausted) return { status: exhausted };
  const completion = await query(state, historyView(state));
  state.messages.push({ role: 'assistant', content: completion.content });
  const toolUses = completion.content.filter((block): block is ToolUseBlock => block.type === 'tool_use');
  if (toolUses.length === 0) {
    if (completion.stopReason !== 'max_tokens') return { status: 'completed' };
    state.messages.push({ role: 'user', content: [{ type: 'text', text: CUT_OFF_NUDGE }] });
    return undefined;
  }
  const { results, ended } = await execute(state, toolUses);
  state.messages.push({ role: 'user', content: results });
  return ended ? { status: 'completed' } : undefined;
}

/** What ends the loop by throwing and is a stop of its own, or undefined (the error goes on up). */
function stopOfError(state: LoopState, error: unknown): Stop | undefined {
  if (state.deadlinePassed()) return { status: 'timeout' };
  if (state.options.signal?.aborted || error instanceof Interrupted) return { status: 'interrupted' };
  if (error instanceof DiskBudgetExceeded) return { status: 'disk-budget', sandboxError: error };
  if (error instanceof SandboxDead) return { status: 'sandbox-stopped', sandboxError: error };
  return undefined;
}

/** The messages the model is shown: all of them, or the newest that fit the context window. */
function historyView(state: LoopState): Message[] {
  if (state.historyBudget === undefined) return state.messages;
  const trimmed = trimHistory(state.messages, { maxTokens: state.historyBudget });
  if (trimmed.droppedMessages !== state.lastDropped && trimmed.droppedMessages > 0) {
    state.options.events.emit({
      ...state.base,
      kind: 'history_trimmed',
      turn: state.turns + 1,
      droppedMessages: trimmed.droppedMessages,
    });
  }
  state.lastDropped = trimmed.droppedMessages;
  return trimmed.messages;
}

/** One model call, counted against the budget and logged (a failed call too). */
async function query(state: LoopState, view: Message[]): Promise<Completion> {
  const { provider, events, system } = state.options;
  const { base, signal } = state;
  const started = Date.now();
  let completion: Completion;
  try {
    completion = await abortable(
      provider.complete({
        system,
        messages: view,
        tools: state.definitions,
        maxTokens: state.maxTokens,
        signal,
      }),
      signal,
    );
  } catch (error) {
    events.emit({
      ...base,
      kind: 'model_call',
      turn: state.turns + 1,
      provider: provider.name,
      model: provider.model,
      durationMs: Date.now() - started,
      isError: true,
    });
    throw error;
  }
  state.turns++;
  state.budget.spend(completion.usage);
  state.usage.inputTokens += completion.usage.inputTokens;
  state.usage.outputTokens += completion.usage.outputTokens;
  events.emit({
    ...base,
    kind: 'model_call',
    turn: state.turns,
    provider: provider.name,
    model: completion.model,
    durationMs: Date.now() - started,
    tokens: {
      input: completion.usage.inputTokens,
      output: completion.usage.outputTokens,
      ...(completion.usage.cacheReadTokens ? { cacheRead: completion.usage.cacheReadTokens } : {}),
      ...(completion.usage.cacheWriteTokens ? { cacheWrite: completion.usage.cacheWriteTokens } : {}),
    },
    stopReason: completion.stopReason,
    isError: false,
  });
  return completion;
}

/**
 * The tool calls of one answer, in order, each in the sandbox. Errors the model can act on
 * come back as results; a dead sandbox, a spent budget and Ctrl-C throw.
 */
async function execute(
  state: LoopState,
  toolUses: readonly ToolUseBlock[],
): Promise<{ results: ToolResultBlock[]; ended: boolean }> {
  const { tools, sandbox, events } = state.options;
  const { signal, base } = state;
  const results: ToolResultBlock[] = [];
  let ended = false;
  for (const call of toolUses) {
    const toolStarted = Date.now();
    const subAgentFailure: { error?: unknown } = {};
    const delegate = delegateFor(state, call.id, subAgentFailure);
    state.options.onToolStart?.({ name: call.name, input: call.input, turn: state.turns });
    const result = await abortable(
      tools.run(call.name, call.input, { sandbox, signal, ...(delegate ? { delegate } : {}) }),
      signal,
    );
    // What ends a sub-agent's loop by throwing (a dead sandbox, a failed model API) ends
    // this one too, rather than becoming a tool result the model would try to work around.
    if ('error' in subAgentFailure) throw subAgentFailure.error;
    events.emit({
      ...base,
      kind: 'tool_call',
      turn: state.turns,
      tool: call.name,
      toolUseId: call.id,
      durationMs: Date.now() - toolStarted,
      ...(result.exitCode === undefined ? {} : { exitCode: result.exitCode }),
      isError: result.isError,
      // What went wrong, so a log and a progress line say more than "error".
      ...(result.isError ? { message: errorSummary(result.content) } : {}),
    });
    results.push({
      type: 'tool_result',
      toolUseId: call.id,
      content: result.content,
      isError: result.isError,
    });
    if (result.endsLoop) ended = true;
  }
  return { results, ended };
}

/** The `delegate` capability of one tool call; a sub-agent's failure is left in `failure`. */
function delegateFor(
  state: LoopState,
  callId: string,
  failure: { error?: unknown },
): DelegateCapability | undefined {
  const { options } = state;
  const subAgent = options.subAgent;
  if (!subAgent) return undefined;
  return async (firstUserMessage) => {
    try {
      const sub = await runLoop(
        {
          ...options,
          provider: subAgent.provider,
          tools: options.tools.without('delegate'),
          firstUserMessage,
          events: nestedSink(options.events, 'delegate', callId),
          // No deadline of its own: this loop's signal carries it and aborts the sub-agent too.
          limits: { maxTurns: options.limits.maxTurns },
          signal: state.signal,
          subAgent: undefined,
          // Its own conversation: nothing of it enters the parent's.
          messages: [],
        },
        state.budget,
      );
      // A sandbox that stopped under the sub-agent stops the parent the same way.
      if (sub.sandboxError) throw sub.sandboxError;
      state.delegatedTurns += sub.turns;
      state.usage.inputTokens += sub.usage.inputTokens;
      state.usage.outputTokens += sub.usage.outputTokens;
      state.delegations.push({
        toolUseId: callId,
        status: sub.status,
        turns: sub.turns,
        messages: sub.messages,
      });
      return { status: sub.status, finalText: sub.finalText, turns: sub.turns };
    } catch (error) {
      failure.error = error;
      throw error;
    }
  };
}
