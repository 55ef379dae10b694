/**
 * A command's declaration: the commander command (name, description, arguments, options and
 * their help, typed by `@commander-js/extra-typings`) and the action that runs it, whose
 * arguments and options are exactly the declared ones. `buildProgram` is the list of them.
 *
 * Command files import only light modules at their top (commander, the parsers, output
 * helpers); what an action needs to do its work (the engine client, schemas, model SDKs) it
 * imports inside the action, so `--help` and every other command never load it
 * (`tests/unit/cli/declarations.test.ts` pins this).
 */
import type { Command, CommandUnknownOpts, OptionValues } from '@commander-js/extra-typings';
import type { CliContext } from './cli-context.js';

/** Runs an action with the CLI's context and keeps its exit code (see `buildProgram`). */
export type Runner = (action: (ctx: CliContext) => Promise<number>) => Promise<void>;

export interface DeclaredCommand {
  /** A new commander command (each program gets its own), whose action goes through `run`. */
  build(run: Runner): CommandUnknownOpts;
}

/** The options an action of this declaration gets: what the declared flags make, nothing else. */
export type OptionsOf<Declaration> = Declaration extends () => Command<infer _Args, infer Opts, infer _Global>
  ? Opts
  : never;

/** True when A and B are the same type (not merely assignable one way). */
type Same<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;

/**
 * An action may take the context alone, or the context, the declared arguments and the
 * declared options, exactly: an options type with a flag that is not declared (or a number
 * typed as text) does not compile.
 */
type TakesExactly<Action, Declared extends unknown[]> = Action extends (
  ctx: CliContext,
  ...args: infer Taken
) => Promise<number>
  ? Taken extends []
    ? unknown
    : Same<Taken, Declared> extends true
      ? unknown
      : { 'the action must take exactly the declared arguments and options': Declared }
  : never;

export function declareCommand<
  Args extends unknown[],
  Opts extends OptionValues,
  Action extends (ctx: CliContext, ...args: [...Args, Opts]) => Promise<number>,
>(
  declaration: () => Command<Args, Opts>,
  action: Action & TakesExactly<Action, [...Args, Opts]>,
): DeclaredCommand {
  return {
    build(run) {
      const command = declaration();
      return command.action(() => run((ctx) => action(ctx, ...command.processedArgs, command.opts())));
    },
  };
}

/** A command of subcommands (`catalog validate`, `images list`): no action of its own. */
export function declareGroup(
  declaration: () => CommandUnknownOpts,
  subcommands: DeclaredCommand[],
): DeclaredCommand {
  return {
    build(run) {
      const group = declaration();
      for (const sub of subcommands) group.addCommand(sub.build(run));
      return group;
    },
  };
}

/**
 * Adds a declared command under `parent`, it and its subcommands with the parent's settings
 * (exit override, help after an error, output), as `parent.command(name)` would have.
 */
export function addDeclared(parent: CommandUnknownOpts, declared: DeclaredCommand, run: Runner): void {
  const command = declared.build(run);
  inherit(command, parent);
  parent.addCommand(command);
}

function inherit(command: CommandUnknownOpts, parent: CommandUnknownOpts): void {
  command.copyInheritedSettings(parent);
  for (const sub of command.commands) inherit(sub, command);
}
