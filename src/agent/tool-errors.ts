/**
 * The one place where an error becomes a tool result for the model. A tool failure is an
 * observation (the model reads it and tries something else); a dead sandbox, a spent
 * budget or an interruption is not something the model can fix, so those end the attempt.
 */
import { HarnessError, Interrupted, LimitExceeded, SandboxDead } from '../errors.js';

/** A tool refused or failed in a way the model can act on (bad path, no match, not editable). */
export class ToolError extends HarnessError {
  constructor(message: string, hint?: string) {
    super('TOOL', 'usage', message, hint === undefined ? {} : { hint });
  }
}

export interface ToolErrorResult {
  content: string;
  isError: true;
}

function isAbortError(error: unknown): boolean {
  return error instanceof Error && error.name === 'AbortError';
}

export function toolErrorResult(error: unknown): ToolErrorResult {
  if (error instanceof SandboxDead || error instanceof Interrupted || error instanceof LimitExceeded)
    throw error;
  // An unreachable engine or model API is nothing the model can work around.
  if (error instanceof HarnessError && error.category === 'infrastructure') throw error;
  if (isAbortError(error)) throw new Interrupted('tool call interrupted', { cause: error });
  if (error instanceof HarnessError) {
    return { content: error.hint ? `${error.message}\nHint: ${error.hint}` : error.message, isError: true };
  }
  // Unknown errors can carry host details (paths, stack traces); the model gets none of that.
  return { content: 'the tool failed with an unexpected internal error; try another way', isError: true };
}
