/** `--engines FILE` and `--engine CONTEXT-OR-URL`, as every command that takes them reads them. */
import { resolveEngines, type EngineSpec } from '../sandbox/backend-registry.js';
import type { CliContext } from './cli-context.js';

export interface EngineFlags {
  /** An engines file (`--engines`). */
  engines?: string;
  /** `--engine` values (context names or URLs), in order. */
  engine?: string[];
}

export function enginesNamed(flags: EngineFlags): boolean {
  return flags.engines !== undefined || (flags.engine ?? []).length > 0;
}

/** The engines the flags name (the local engine alone when they name none). */
export function resolveEngineFlags(ctx: CliContext, flags: EngineFlags): Promise<EngineSpec[]> {
  return resolveEngines({
    file: flags.engines,
    refs: flags.engine ?? [],
    cwd: ctx.cwd,
    env: ctx.env,
  });
}
