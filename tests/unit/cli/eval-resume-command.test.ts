import { describe, expect, it } from 'vitest';
import { resumeCommand, type EvalCommandOptions } from '../../../src/cli/commands/eval.js';
import { shardOption } from '../../../src/cli/option-parsers.js';
import { Command } from '@commander-js/extra-typings';

const options = (extra: Partial<EvalCommandOptions>): EvalCommandOptions =>
  ({ ...extra }) as EvalCommandOptions;

describe('the command an interrupted eval prints', () => {
  it('names the suite, the folder and --resume (the lock has -n and the sources’ flags), and the engines given, quoted for the shell', () => {
    const line = resumeCommand(
      { cwd: '/home/me' },
      'my suites/suite.yaml',
      options({ n: 3, oracle: true, costLimit: 2, engines: 'engines.yaml', engine: ['box a'] }),
      { outDir: '/home/me/evals/run 1', run: {} },
    );
    expect(line).toBe(
      "sandbox-harness eval 'my suites/suite.yaml' --out 'evals/run 1' --resume --engines engines.yaml --engine 'box a'",
    );
    expect(line).not.toMatch(/-n|--oracle|--cost-limit/);
  });

  it('keeps the shard, and says --rerun-unscored when that is what is asked', () => {
    expect(
      resumeCommand(
        { cwd: '/w' },
        's.yaml',
        options({}),
        { outDir: '/w/out', run: { shard: { index: 2, count: 4 } } },
        '--rerun-unscored',
      ),
    ).toBe('sandbox-harness eval s.yaml --out out --rerun-unscored --shard 2/4');
  });
});

describe('--shard on the command line', () => {
  const parse = (args: string[]) =>
    new Command()
      .exitOverride()
      .configureOutput({ writeErr: () => undefined })
      .addOption(shardOption('--shard <k/n>', 'the shard'))
      .parse(args, { from: 'user' })
      .opts();

  it('is a pair, or a usage error naming the flag and the text', () => {
    expect(parse(['--shard', '3/8']).shard).toEqual({ index: 3, count: 8 });
    expect(() => parse(['--shard', '9/8'])).toThrow(/--shard: expected K\/N.*got "9\/8"/);
  });
});
