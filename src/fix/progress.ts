import type { EventInput, EventSink } from '../agent/events.js';
import { oneLine, toolInputSummary } from '../agent/tool-summary.js';
import { formatDuration } from '../format.js';
import { isRunEvent, type RunEvent } from '../runs/journal.js';

/** What the fix loop (and a backlog's `item`) reports while it works; the CLI decides how it looks. */
export type Phase =
  'validate' | 'image' | 'setup' | 'baseline' | 'attempt' | 'verify' | 'apply' | 'done' | 'item';

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

/** Longest input a progress line quotes. */
const INPUT_CHARS = 100;

/** A call's input as a progress line quotes it (the event's summary, cut shorter). */
function inputOf(input: string | undefined): string {
  return input === undefined ? '' : ` ${oneLine(input, INPUT_CHARS)}`;
}

/**
 * The live line as a tool call starts: `running: <command>` for a command (a long one then
 * shows what it is while it runs), the tool and its path otherwise. Shown on a live terminal
 * line only (`tick`): the call's one line in a log is its end (`toolEndDetail`). The text is
 * the model's: the terminal sink escapes it.
 */
export function toolStartDetail(call: { name: string; input: unknown; turn: number }): string {
  const input = toolInputSummary(call.name, call.input);
  if (call.name === 'run_command' && input !== undefined)
    return `turn ${call.turn}: running:${inputOf(input)}`;
  return `turn ${call.turn}: ${call.name}${inputOf(input)}`;
}

/**
 * A tool call's one progress line, as it ends: the tool, what it used, its exit code and how
 * long it took (`turn 4: run_command npm test (exit 1, 7.1s)`), and what went wrong when it failed.
 */
export function toolEndDetail(event: EventInput): string {
  const facts = [
    event.exitCode === undefined ? '' : `exit ${event.exitCode}`,
    event.durationMs === undefined ? '' : formatDuration(event.durationMs),
  ].filter(Boolean);
  const error = event.isError ? ` error: ${event.message ?? 'failed'}` : '';
  const took = facts.length > 0 ? ` (${facts.join(', ')})` : '';
  return `turn ${event.turn ?? '?'}: ${event.tool}${inputOf(event.input)}${took}${error}`;
}

/**
 * Where an image build's output lines go: a live terminal line shows the latest (a build
 * takes a while), a log leaves them out (the phase's end says built or cached, the whole log
 * is a file of the run, and a failed build's error quotes its last lines).
 */
export function buildLines(progress: ProgressSink | undefined): (line: string) => void {
  return (line) => progress?.tick?.(line.slice(0, 120));
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
    case 'setup_start':
      progress.phase('setup', `setup: ${event.command}`);
      return;
    case 'setup':
      progress.end(
        event.setup.reusedFrom !== undefined
          ? `shared: made by ${event.setup.reusedFrom}`
          : `made in ${formatDuration(event.setup.durationMs)}`,
      );
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
    case 'agent_error':
      progress.end(`agent stopped by an error after ${event.turns} turns`);
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
      if (event.tool) progress.detail(toolEndDetail(event));
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
