/** What the fix loop reports while it works; the CLI decides how it looks. */
export type Phase = 'validate' | 'image' | 'baseline' | 'attempt' | 'verify' | 'apply' | 'done';

export interface ProgressSink {
  /** A new phase begins (a new line on a terminal). */
  phase(phase: Phase, text: string): void;
  /** Detail within the current phase (rewrites the live line on a terminal). */
  detail(text: string): void;
  /** The phase ended; `text` is its one-line result. */
  end(text: string): void;
}

export const silentProgress: ProgressSink = {
  phase: () => undefined,
  detail: () => undefined,
  end: () => undefined,
};
