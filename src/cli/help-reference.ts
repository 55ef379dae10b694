/**
 * The CLI reference for docs/cli.md: the `--help` of the program and of every command, as the
 * built program prints it, at a fixed width so the page does not depend on a terminal.
 * `npm run schema` writes it; a unit test fails when it is out of date.
 */
import type { CommandUnknownOpts } from '@commander-js/extra-typings';
import { buildProgram } from './index.js';

const WIDTH = 100;

function helpOf(command: CommandUnknownOpts): string {
  let text = '';
  command.configureOutput({
    writeOut: (s) => (text += s),
    writeErr: (s) => (text += s),
    getOutHelpWidth: () => WIDTH,
    getErrHelpWidth: () => WIDTH,
    getOutHasColors: () => false,
    getErrHasColors: () => false,
  });
  command.outputHelp();
  return text.trimEnd();
}

function fullName(command: CommandUnknownOpts): string {
  const names: string[] = [];
  for (let c: CommandUnknownOpts | null = command; c; c = c.parent) names.unshift(c.name());
  return names.join(' ');
}

function sections(command: CommandUnknownOpts, level: number): string[] {
  const heading = `${'#'.repeat(level)} \`${fullName(command)}\``;
  const own = [heading, '', '```text', helpOf(command), '```'].join('\n');
  return [own, ...command.commands.flatMap((sub) => sections(sub, level + 1))];
}

/** Every command's help, the program's first, one section each (subcommands nested). */
export function cliReferenceMarkdown(): string {
  const program = buildProgram(() => undefined).command;
  return sections(program, 2).join('\n\n');
}
