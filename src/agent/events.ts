/**
 * The run's event log: one JSON object per line (time, kind, tool, duration, exit code,
 * tokens). Events carry facts about calls and, of a tool call, a one-line summary of its
 * input (the command, the path, the pattern: `tool-summary.ts`), never whole inputs,
 * environment values or headers; the file sink also scrubs secret-looking environment
 * values in case a message or a command ever quotes one.
 */
import { appendFileSync, mkdirSync } from 'node:fs';
import { dirname } from 'node:path';

export type EventKind =
  | 'attempt_start'
  | 'attempt_end'
  | 'model_call'
  | 'model_retry'
  | 'tool_call'
  | 'history_trimmed'
  | 'loop_end'
  // Other modules (fix, evals) add their own kinds.
  | (string & {});

export interface HarnessEvent {
  /** ISO 8601. */
  time: string;
  kind: EventKind;
  attempt?: number;
  /** Eval trial tag (`<task>#<n>`), so one log can hold many concurrent trials. */
  trial?: string;
  turn?: number;
  tool?: string;
  toolUseId?: string;
  /** Of a tool call: its input in one cut line (the command, path or pattern it used). */
  input?: string;
  durationMs?: number;
  exitCode?: number;
  isError?: boolean;
  tokens?: { input: number; output: number; cacheRead?: number; cacheWrite?: number };
  stopReason?: string;
  status?: string;
  provider?: string;
  model?: string;
  droppedMessages?: number;
  message?: string;
  /** Who emitted it below the main agent (`delegate` for a sub-agent); absent for the main agent. */
  agent?: string;
  /** For a sub-agent's events: the toolUseId of the `delegate` call that started it. */
  parent?: string;
}

export type EventInput = Omit<HarnessEvent, 'time'> & { time?: string };

export interface EventSink {
  emit(event: EventInput): void;
}

function stamp(event: EventInput): HarnessEvent {
  return { ...event, time: event.time ?? new Date().toISOString() };
}

export class MemoryEventSink implements EventSink {
  readonly events: HarnessEvent[] = [];

  emit(event: EventInput): void {
    this.events.push(stamp(event));
  }

  ofKind(kind: EventKind): HarnessEvent[] {
    return this.events.filter((event) => event.kind === kind);
  }
}

export const NULL_EVENT_SINK: EventSink = { emit: () => {} };

/** A sink that files every event under a sub-agent: `agent` says which, `parent` under which call. */
export function nestedSink(sink: EventSink, agent: string, parent: string): EventSink {
  return { emit: (event) => sink.emit({ ...event, agent, parent }) };
}

const SECRET_NAME = /KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH/i;

/** Values of environment variables whose names look like credentials (long enough to be real). */
export function secretValuesFromEnv(env: Readonly<Record<string, string | undefined>>): string[] {
  const values = new Set<string>();
  for (const [name, value] of Object.entries(env)) {
    if (value !== undefined && value.length >= 8 && SECRET_NAME.test(name)) values.add(value);
  }
  // Longest first, so a secret containing another is scrubbed whole.
  return [...values].sort((a, b) => b.length - a.length);
}

export function redact(text: string, secrets: readonly string[]): string {
  let out = text;
  for (const secret of secrets) if (out.includes(secret)) out = out.split(secret).join('[redacted]');
  return out;
}

export interface JsonlEventSinkOptions {
  /** Values never to write; by default the secret-looking values of the host environment. */
  secrets?: readonly string[];
}

/**
 * Appends synchronously, one line per event, so the log is complete up to the last event
 * even when the process is killed.
 */
export class JsonlEventSink implements EventSink {
  private readonly secrets: readonly string[];

  constructor(
    readonly file: string,
    options: JsonlEventSinkOptions = {},
  ) {
    this.secrets = options.secrets ?? secretValuesFromEnv(process.env);
    mkdirSync(dirname(file), { recursive: true });
  }

  emit(event: EventInput): void {
    appendFileSync(this.file, `${redact(JSON.stringify(stamp(event)), this.secrets)}\n`, 'utf8');
  }
}

export function fanOut(...sinks: EventSink[]): EventSink {
  return {
    emit(event) {
      const stamped = stamp(event);
      for (const sink of sinks) sink.emit(stamped);
    },
  };
}
