/** `shell <run>`: an interactive shell in a run's kept container (sandbox user, no network). */
import { UsageError } from '../../errors.js';
import { note, type CliContext } from '../cli-context.js';
import { declareCommand, type OptionsOf } from '../declare-command.js';
import { keptSandboxCommand } from '../shared-options.js';

function declaration() {
  return keptSandboxCommand(
    'shell',
    "an interactive shell in a run's kept container (sandbox user, no network)",
  );
}

export type ShellOptions = OptionsOf<typeof declaration>;

export async function shellCommand(ctx: CliContext, ref: string, options: ShellOptions): Promise<number> {
  const { resolveRun } = await import('../../runs/record.js');
  const { backendOfRun, keptAttemptSandbox, keptContainerPresent, runsDirOf } =
    await import('../run-lookup.js');
  const run = await resolveRun(await runsDirOf(ctx, options), ref);
  const request = keptAttemptSandbox(run, options.attempt);
  const id = request.id;
  const backend = await backendOfRun(ctx, run.record, options);
  // The record is only a claim: the container must be this run's sandbox before anything else,
  // so a forged record learns nothing about someone else's container, terminal or not.
  await keptContainerPresent(backend, request, run);
  if (!process.stdin.isTTY) {
    throw new UsageError('`shell` needs an interactive terminal', {
      hint: `Use \`docker exec -it -u 1000 ${id.slice(0, 12)} sh\` from a script, or run it in a terminal.`,
    });
  }
  const where = backend.engine === 'local' ? '' : ` on engine ${backend.engine}`;
  note(
    ctx,
    `shell in kept container ${id.slice(0, 12)}${where} (run ${run.record.id}); no network; exit to leave`,
  );
  try {
    return await backend.interactiveShell(request, { stdin: process.stdin, stdout: process.stdout });
  } finally {
    await backend.release(request);
  }
}

export const shell = declareCommand(declaration, shellCommand);
