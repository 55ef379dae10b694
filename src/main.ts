#!/usr/bin/env node
/**
 * Entry point: runs the CLI and maps every error to an exit code. This is the only place
 * that calls `process.exit`; commands return an exit code or throw a HarnessError.
 */
import { CommanderError } from '@commander-js/extra-typings';
import { HarnessError, ConfigError } from './errors.js';
import { EXIT_CODES, exitCodeForError } from './cli/exit-codes.js';
import { terminalSafe } from './cli/terminal.js';
import { buildProgram } from './cli/index.js';

function printError(error: unknown, json: boolean): void {
  if (json) {
    const payload =
      error instanceof HarnessError
        ? {
            error: {
              code: error.code,
              category: error.category,
              message: error.message,
              hint: error.hint,
              problems: error instanceof ConfigError ? error.problems : undefined,
            },
          }
        : { error: { code: 'INTERNAL', category: 'internal', message: String(error) } };
    process.stdout.write(`${JSON.stringify(payload, null, 2)}\n`);
    return;
  }
  if (error instanceof HarnessError) {
    // Messages quote file names, build lines and sandbox output: hostile text.
    const say = (text: string) => process.stderr.write(`${terminalSafe(text)}\n`);
    say(`error: ${error.message}`);
    if (
      error instanceof ConfigError &&
      error.problems.length > 0 &&
      !error.message.includes(error.problems[0]!)
    ) {
      for (const problem of error.problems) say(`  ${problem}`);
    }
    if (error.hint) say(`hint: ${error.hint}`);
    if (process.env.SANDBOX_HARNESS_DEBUG && error.cause) say(String(error.cause));
    return;
  }
  process.stderr.write(
    `${terminalSafe(`internal error: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`)}\n`,
  );
  process.stderr.write('This is a bug in sandbox-harness; please report it with the command you ran.\n');
}

async function main(argv: string[]): Promise<number> {
  const json = argv.includes('--json');
  const program = buildProgram((code) => process.exit(code));
  try {
    await program.command.parseAsync(argv);
    return program.exitCode();
  } catch (error) {
    if (error instanceof CommanderError) {
      if (
        error.code === 'commander.helpDisplayed' ||
        error.code === 'commander.version' ||
        error.exitCode === 0
      ) {
        return EXIT_CODES.ok;
      }
      return EXIT_CODES.usage;
    }
    printError(error, json);
    return exitCodeForError(error);
  }
}

// `sandbox-harness runs | head` closes the pipe early; that is not an error.
for (const stream of [process.stdout, process.stderr]) {
  stream.on('error', (error: NodeJS.ErrnoException) => {
    if (error.code === 'EPIPE') process.exit(process.exitCode ?? 0);
    throw error;
  });
}

main(process.argv).then(
  (code) => {
    process.exitCode = code;
    // Lingering sockets (dockerode's agent, SDK keep-alives) must not keep the CLI alive.
    setTimeout(() => process.exit(code), 50).unref();
  },
  (error: unknown) => {
    printError(error, false);
    process.exit(EXIT_CODES.internal);
  },
);
