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
