import type { HarnessEvent } from '../agent/events.js';
import { formatDuration } from '../format.js';

/** What the fix loop reports while it works; the CLI decides how it looks. */
export type Phase = 'validate' | 'image' | 'baseline' | 'attempt' | 'verify' | 'apply' | 'done';

export interface ProgressSink {
  /** A new phase begins (a new line on a terminal). */
  phase(phase: Phase, text: string): void;
  /** Detail within the current phase (rewrites the live line on a terminal). */
  detail(text: string): void;
  /**
   * A passing status (a build's step) worth showing on a live line only: a terminal
   * shows it like a detail, a log leaves it out (the phase's end says how it went).
   */
  tick?(text: string): void;
  /** The phase ended; `text` is its one-line result. */
  end(text: string): void;
}

export const silentProgress: ProgressSink = {
  phase: () => undefined,
  detail: () => undefined,
  end: () => undefined,
};

/** Longest command a progress line quotes. */
const COMMAND_CHARS = 100;

/**
 * The progress detail as a tool call starts: `running: <command>` for a command (a long one
 * then shows what it is while it runs), the tool and its path otherwise. The text is the
 * model's: the terminal sink escapes it.
 */
export function toolStartDetail(call: { name: string; input: unknown; turn: number }): string {
  const input = (typeof call.input === 'object' && call.input !== null ? call.input : {}) as Record<
    string,
    unknown
  >;
  const field = (key: string): string | undefined =>
    typeof input[key] === 'string' ? (input[key] as string) : undefined;
  const command = call.name === 'run_command' ? field('command') : undefined;
  if (command !== undefined) {
    const line = command.replace(/\s+/g, ' ').trim();
    return `turn ${call.turn}: running: ${line.length > COMMAND_CHARS ? `${line.slice(0, COMMAND_CHARS - 1)}…` : line}`;
  }
  const path = field('path');
  return `turn ${call.turn}: ${call.name}${path ? ` ${path}` : ''}`;
}

/**
 * The progress line as a reader of the run's events: each event the line has something to
 * say about (an attempt starting, the agent's stop, how the attempt ended, the image, the
 * baseline beside the first attempt, the loop's calls) becomes its phase, end or detail, so
 * the line says what the journal says, when it says it.
 */
export function progressOfEvents(progress: ProgressSink): { emit(event: HarnessEvent): void } {
  return {
    emit(event) {
      const fields = event as HarnessEvent & { of?: number; summary?: string };
      switch (event.kind) {
        case 'attempt_start':
          progress.phase('attempt', `attempt ${event.attempt ?? '?'}/${fields.of ?? '?'}`);
          return;
        case 'agent_end':
          progress.end(
            `agent ${event.status ?? '?'} after ${(fields as { turns?: number }).turns ?? 0} turns`,
          );
          return;
        case 'attempt_end':
          if (fields.summary !== undefined) progress.end(fields.summary);
          return;
        case 'image':
          progress.end(`${event.message ?? ''}${event.status === 'reused' ? ' (cached)' : ' (built)'}`);
          return;
        case 'tool_call':
          if (event.tool)
            progress.detail(
              `turn ${event.turn ?? '?'}: ${event.tool}${event.isError ? ` error: ${event.message ?? 'failed'}` : ''}`,
            );
          return;
        case 'model_call':
          progress.detail(`turn ${event.turn ?? '?'}: model answered`);
          return;
        case 'baseline':
          // The baseline runs beside the first attempt: its verdict shows in whatever phase is live.
          progress.detail(baselineLine(event));
          return;
      }
    },
  };
}

/** The baseline's verdict as a progress line. */
function baselineLine(event: {
  status?: string;
  durationMs?: number;
  exitCode?: number;
  message?: string;
}): string {
  const took = event.durationMs === undefined ? '' : ` in ${formatDuration(event.durationMs)}`;
  const what =
    event.status === 'broken'
      ? `the test command itself failed to run (${event.message ?? 'see the record'})`
      : event.status === 'passing'
        ? 'the tests already pass on the untouched repo'
        : `the tests fail on the untouched repo (exit ${event.exitCode ?? '?'}), as a ticket expects`;
  return `baseline: ${what}${took}`;
}
