import type { EventInput, EventSink } from '../agent/events.js';
import { formatDuration } from '../format.js';
import { isRunEvent, type RunEvent } from '../runs/journal.js';

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
 * say about (a step starting, the agent's stop, how the attempt ended, the image, the
 * baseline beside the first attempt, the loop's calls) becomes its phase, end or detail, so
 * the line says what the journal says, when it says it. A step that shows on the line appends
 * an event; it never calls the line itself (the few exceptions say why where they are).
 */
export function progressOfEvents(progress: ProgressSink): EventSink {
  return {
    emit(event) {
      if (isRunEvent(event)) runEventProgress(progress, event);
      else loopEventProgress(progress, event);
    },
  };
}

/** What a domain event of the journal shows on the line (most show nothing). */
function runEventProgress(progress: ProgressSink, event: RunEvent): void {
  switch (event.kind) {
    case 'image_start':
      progress.phase('image', 'sandbox image');
      return;
    case 'image':
      progress.end(`${event.message}${event.status === 'reused' ? ' (cached)' : ' (built)'}`);
      return;
    case 'workspace_git':
      if (event.workspaceGit.note !== undefined) progress.detail(`note: ${event.workspaceGit.note}`);
      return;
    case 'baseline':
      // The baseline runs beside the first attempt: its verdict shows in whatever phase is live.
      progress.detail(baselineLine(event));
      for (const hint of event.hints ?? []) progress.detail(`hint: ${hint}`);
      return;
    case 'attempt_start':
      progress.phase('attempt', `attempt ${event.attempt}/${event.of ?? '?'}`);
      return;
    case 'agent_end':
      progress.end(`agent ${event.status} after ${event.turns} turns`);
      return;
    case 'collect_start':
      progress.phase('verify', `attempt ${event.attempt}: checking the change`);
      return;
    case 'verify_start':
      progress.detail(`attempt ${event.attempt}: verifying in a fresh sandbox`);
      return;
    case 'verify_layer':
      progress.detail(`attempt ${event.attempt}: verifying (${event.layer}: ${event.command})`);
      return;
    case 'review_start':
      progress.detail(
        `attempt ${event.attempt}: an independent checker reviews the change (round ${event.round})`,
      );
      return;
    case 'attempt_end':
      if (event.summary !== undefined) progress.end(event.summary);
      return;
    case 'apply_start':
      progress.phase('apply', 'applying the verified patch to the host repo');
      return;
    case 'apply':
      if (event.status === 'applied') progress.end(`${event.files ?? '?'} file(s) written`);
      else if (event.status === 'not-applied') progress.end(`not applied: ${event.message}`);
      return;
    default:
      return;
  }
}

/** What a fact of the agent's loop shows on the line: each model answer and tool call. */
function loopEventProgress(progress: ProgressSink, event: EventInput): void {
  switch (event.kind) {
    case 'tool_call':
      if (event.tool)
        progress.detail(
          `turn ${event.turn ?? '?'}: ${event.tool}${event.isError ? ` error: ${event.message ?? 'failed'}` : ''}`,
        );
      return;
    case 'model_call':
      progress.detail(`turn ${event.turn ?? '?'}: model answered`);
      return;
  }
}

/** The baseline's verdict as a progress line. */
function baselineLine(event: {
  status?: string | undefined;
  durationMs?: number | undefined;
  exitCode?: number | undefined;
  message?: string | undefined;
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
