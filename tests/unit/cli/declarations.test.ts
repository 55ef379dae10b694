/**
 * The typed CLI: every command's options reach its action as declared (numbers as numbers,
 * parsed once where commander reads them), an action cannot take an option that is not
 * declared (type-level: `npm run typecheck` fails), and the program loads nothing heavy
 * before a command runs.
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { Command, CommanderError, type CommandUnknownOpts } from '@commander-js/extra-typings';
import { describe, expect, expectTypeOf, it } from 'vitest';
import type { CliContext } from '../../../src/cli/cli-context.js';
import type { ExecCommandOptions } from '../../../src/cli/commands/exec.js';
import type { EvalCommandOptions } from '../../../src/cli/commands/eval.js';
import type { FixCommandOptions } from '../../../src/cli/commands/fix.js';
import type { GcCommandOptions } from '../../../src/cli/commands/gc.js';
import type { InspectOptions } from '../../../src/cli/commands/inspect.js';
import type { RerunTestsOptions } from '../../../src/cli/commands/rerun-tests.js';
import type { ShellOptions } from '../../../src/cli/commands/shell.js';
import { declareCommand, type OptionsOf } from '../../../src/cli/declare-command.js';
import { buildProgram } from '../../../src/cli/index.js';
import { flagKind, integerOption } from '../../../src/cli/option-parsers.js';
import { UsageError } from '../../../src/errors.js';
import { ROOT } from '../../helpers/cli.js';

interface Leaf {
  path: string[];
  command: CommandUnknownOpts;
}

function leaves(command: CommandUnknownOpts, at: string[] = []): Leaf[] {
  const subs = command.commands.filter((sub) => sub.name() !== 'help');
  // A command with arguments of its own runs too, beside its subcommands (`eval <suite>`, `eval merge <out>`).
  const self = subs.length === 0 || command.registeredArguments.length > 0 ? [{ path: at, command }] : [];
  return [...self, ...subs.flatMap((sub) => leaves(sub, [...at, sub.name()]))];
}

/** A new program whose actions only record what they were given (nothing runs, no handler is installed). */
function recordingProgram() {
  const program = buildProgram(() => undefined).command;
  const quiet = (command: CommandUnknownOpts): void => {
    command.configureOutput({ writeOut: () => undefined, writeErr: () => undefined });
    for (const sub of command.commands) quiet(sub);
  };
  quiet(program);
  const calls: Array<{ path: string; args: unknown[]; options: Record<string, unknown> }> = [];
  for (const leaf of leaves(program)) {
    leaf.command.action(function () {
      calls.push({ path: leaf.path.join(' '), args: this.processedArgs, options: this.opts() });
    });
  }
  return { program, calls };
}

/** Just enough arguments for the command to run: its required ones. */
function requiredArgs(command: CommandUnknownOpts): string[] {
  return command.registeredArguments.filter((a) => a.required).map(() => 'x');
}

/** Value names that say a number (`--max-attempts <n>`, `--timeout <sec>`, ...). */
const NUMERIC_VALUE = /^<(n|c|count|sec|seconds|ms|usd|age|port|size|bytes)>$/;

const numericOptions = leaves(buildProgram(() => undefined).command).flatMap((leaf) =>
  leaf.command.options
    .filter((o) => NUMERIC_VALUE.test(o.flags.split(' ').pop() ?? '') || flagKind(o) !== undefined)
    .map((option) => ({ ...leaf, option, name: `${leaf.path.join(' ')} ${option.long ?? option.short}` })),
);

describe('every command of the program', () => {
  it('has its numeric flags (a value name such as <n>, <sec>, <usd>, <age>) parsed by a shared parser', () => {
    const unparsed = numericOptions.filter((o) => flagKind(o.option) === undefined).map((o) => o.name);
    expect(unparsed).toEqual([]);
    // The flags this round typed: none of them may go back to text.
    expect(numericOptions.map((o) => o.name).sort()).toEqual(
      expect.arrayContaining([
        'eval --concurrency',
        'eval --cost-limit',
        'eval --n',
        'exec --timeout',
        'fix --cost-limit',
        'fix --max-attempts',
        'gc --older-than',
        'inspect --attempt',
        'rerun-tests --attempt',
        'shell --attempt',
        'view --port',
      ]),
    );
  });

  it.each(numericOptions.map((o) => [o.name, o] as const))(
    '%s reaches the action as a number, and a bad value stops before it (exit 2, naming the flag)',
    async (_name, { path: at, command, option }) => {
      const kind = flagKind(option)!;
      const flag = option.long ?? option.short!;
      const good = recordingProgram();
      await good.program.parseAsync([...at, ...requiredArgs(command), flag, kind.sample], { from: 'user' });
      expect(good.calls).toHaveLength(1);
      const value = good.calls[0]!.options[option.attributeName()];
      expect(typeof value).toBe('number');
      expect(value).toBe(option.parseArg!(kind.sample, undefined));

      const bad = recordingProgram();
      const error = await bad.program
        .parseAsync([...at, ...requiredArgs(command), flag, 'nonsense'], { from: 'user' })
        .then(
          () => undefined,
          (e: unknown) => e,
        );
      expect(error).toBeInstanceOf(UsageError);
      expect((error as Error).message).toMatch(
        new RegExp(`^${option.flags.split(/[ ,]/)[0]}: expected .+, got "nonsense"$`),
      );
      expect(bad.calls).toEqual([]);
    },
  );

  it('hands an action only options it declares', async () => {
    for (const leaf of leaves(buildProgram(() => undefined).command)) {
      const { program, calls } = recordingProgram();
      await program.parseAsync([...leaf.path, ...requiredArgs(leaf.command)], { from: 'user' });
      const declared = leaf.command.options.map((o) => o.attributeName());
      expect(
        Object.keys(calls[0]!.options).filter((k) => !declared.includes(k)),
        leaf.path.join(' '),
      ).toEqual([]);
    }
  });

  it("inherits the program's settings: a bad flag of a subcommand is an error to return, never an exit", async () => {
    for (const argv of [
      ['catalog', 'validate', 'x', '--no-such-flag'],
      ['images', 'ensure', '--no-such-flag'],
      ['fix', 'x', '--keep', 'sometimes'],
    ]) {
      const { program } = recordingProgram();
      const error = await program.parseAsync(argv, { from: 'user' }).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error, argv.join(' ')).toBeInstanceOf(CommanderError);
    }
  });
});

describe('options typed from the declaration', () => {
  it('an action must take exactly the declared options (checked by npm run typecheck)', () => {
    const declaration = () =>
      new Command('t')
        .argument('<a>')
        .addOption(integerOption('--count <n>', 'how many', { min: 1 }))
        .option('--json');
    type Declared = OptionsOf<typeof declaration>;
    declareCommand(
      declaration,
      // @ts-expect-error an options type with a flag that is not declared
      async (_ctx: CliContext, _a: string, _o: Declared & { undeclared?: string }) => 0,
    );
    declareCommand(
      declaration,
      // @ts-expect-error a numeric flag taken as text
      async (_ctx: CliContext, _a: string, _o: { count?: string; json?: true }) => 0,
    );
    declareCommand(declaration, async (_ctx, _a, options) => {
      // @ts-expect-error reading an option that is not declared
      void options.undeclared;
      expectTypeOf(options.count).toEqualTypeOf<number | undefined>();
      return 0;
    });
  });

  it('numeric flags are numbers and choices are their unions in the commands themselves', () => {
    expectTypeOf<FixCommandOptions['maxAttempts']>().toEqualTypeOf<number | undefined>();
    expectTypeOf<FixCommandOptions['costLimit']>().toEqualTypeOf<number | undefined>();
    expectTypeOf<FixCommandOptions['keep']>().toEqualTypeOf<'on-failure' | 'always' | 'never'>();
    expectTypeOf<FixCommandOptions['apply']>().toEqualTypeOf<boolean>();
    expectTypeOf<EvalCommandOptions['n']>().toEqualTypeOf<number | undefined>();
    expectTypeOf<EvalCommandOptions['concurrency']>().toEqualTypeOf<number | undefined>();
    expectTypeOf<EvalCommandOptions['engine']>().toEqualTypeOf<string[] | undefined>();
    expectTypeOf<ExecCommandOptions['timeout']>().toEqualTypeOf<number>();
    expectTypeOf<GcCommandOptions['olderThan']>().toEqualTypeOf<number | undefined>();
    for (const attempt of [{} as InspectOptions, {} as ShellOptions, {} as RerunTestsOptions])
      expectTypeOf(attempt.attempt).toEqualTypeOf<number | undefined>();
  });
});

describe('the program before a command runs', () => {
  /** Modules a file loads when it is loaded (type-only imports and `import()` inside functions left out). */
  async function staticImports(file: string): Promise<string[]> {
    const code = (await readFile(file, 'utf8')).replace(/\/\*[\s\S]*?\*\/|^\s*\/\/.*$/gm, '');
    const typeOnly = (clause: string) =>
      clause.startsWith('type ') ||
      (/^\{[\s\S]*\}$/.test(clause) &&
        clause
          .slice(1, -1)
          .split(',')
          .map((name) => name.trim())
          .filter(Boolean)
          .every((name) => name.startsWith('type ')));
    return [...code.matchAll(/^(?:import|export)\s+([\s\S]*?)\s*from\s+'([^']+)'/gm)]
      .filter(([, clause]) => !typeOnly(clause!))
      .map(([, , specifier]) => specifier!);
  }

  it('loads no package but commander and node: no engine client, schema library or model SDK', async () => {
    const seen = new Set<string>();
    const packages = new Set<string>();
    const visit = async (file: string): Promise<void> => {
      if (seen.has(file)) return;
      seen.add(file);
      for (const specifier of await staticImports(file)) {
        if (specifier.startsWith('.'))
          await visit(path.resolve(path.dirname(file), specifier.replace(/\.js$/, '.ts')));
        else packages.add(specifier);
      }
    };
    await visit(path.join(ROOT, 'src', 'cli', 'index.ts'));
    expect(seen.size).toBeGreaterThan(20);
    expect(
      [...packages].filter((p) => !p.startsWith('node:') && p !== '@commander-js/extra-typings'),
    ).toEqual([]);
  });
});
