import { describe, expect, it } from 'vitest';
import { ToolError, toolErrorResult } from '../../../src/agent/tool-errors.js';
import {
  DiskBudgetExceeded,
  Interrupted,
  RunTimeout,
  SandboxDead,
  SandboxFileError,
  SandboxUnavailable,
} from '../../../src/errors.js';

describe('toolErrorResult', () => {
  it('gives a harness error its message and hint', () => {
    expect(toolErrorResult(new ToolError('no match', 'add context'))).toEqual({
      content: 'no match\nHint: add context',
      isError: true,
    });
    expect(toolErrorResult(new SandboxFileError('a.ts: no such file', 'missing'))).toEqual({
      content: 'a.ts: no such file',
      isError: true,
    });
  });

  it('gives an unknown error a generic message without its details', () => {
    const result = toolErrorResult(new TypeError('cannot read x of undefined at /home/me/.config'));
    expect(result.isError).toBe(true);
    expect(result.content).not.toContain('/home/me');
  });

  it('rethrows what the model cannot fix: a dead sandbox, a spent budget, an unreachable engine, Ctrl-C', () => {
    for (const error of [
      new SandboxDead('gone'),
      new Interrupted(),
      new RunTimeout(),
      new DiskBudgetExceeded(2, 1),
      new SandboxUnavailable('no daemon'),
    ]) {
      expect(() => toolErrorResult(error)).toThrow(error);
    }
  });

  it('treats an AbortError as an interruption', () => {
    const abort = new Error('aborted');
    abort.name = 'AbortError';
    expect(() => toolErrorResult(abort)).toThrow(Interrupted);
  });
});
