/** `demo`: the bundled example (examples/shipping-service, ticket OPS-412) on a temporary copy. */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Command, Option } from '@commander-js/extra-typings';
import { note, print, type CliContext } from '../cli-context.js';
import { declareCommand, type OptionsOf } from '../declare-command.js';
import { keepOption } from '../shared-options.js';
import { fixCommand } from './fix.js';

function declaration() {
  return new Command('demo')
    .description('run the bundled example (examples/shipping-service, ticket OPS-412) on a temporary copy')
    .addOption(
      new Option('--provider <name>', 'run live with this provider instead of the recorded cassette').choices(
        ['anthropic', 'openai'],
      ),
    )
    .option('--model <id>', 'model id for a live run')
    .option('--review', 'with an independent checker (offline: the cassette with a review round)')
    .addOption(keepOption('keep containers').default('on-failure'))
    .option('--json', 'print only the JSON summary of the fix');
}

export type DemoOptions = OptionsOf<typeof declaration>;

/**
 * Runs the bundled shipping-service example: a temporary copy, the recorded cassette
 * (or a live provider), then the outcome, the patch and where the run record is.
 */
export async function demoCommand(ctx: CliContext, options: DemoOptions): Promise<number> {
  const { prepareExampleCopy } = await import('../../demo.js');
  if (!options.json) note(ctx, 'preparing a temporary copy of examples/shipping-service ...');
  const copy = await prepareExampleCopy();
  // The rest of the flags are fix's own, of the same names and types.
  const { provider, ...asFix } = options;
  const cassette = options.review ? 'OPS-412-review.json' : 'OPS-412.json';
  if (!options.json) {
    note(ctx, `example copy: ${copy.root}`);
    note(
      ctx,
      provider ? `model: ${provider} (live)` : `model: the recorded cassette cassettes/${cassette} (offline)`,
    );
  }
  // Paths are absolute, so the run record is shown by its full path, not relative to the copy.
  const code = await fixCommand(ctx, 'OPS-412', {
    ...asFix,
    catalog: copy.catalog,
    ...(provider ? { provider } : { cassette: [join(copy.cassettes, cassette)] }),
    apply: true,
  });
  if (!options.json) {
    const source = await readFile(join(copy.repo, 'src', 'shipping.ts'), 'utf8');
    const line = source.split('\n').find((l) => l.includes('FREE_SHIPPING_THRESHOLD ='));
    print(ctx, `\nthe example copy's src/shipping.ts now says: ${line?.trim() ?? '(no threshold line)'}`);
    print(ctx, `explore it: cd ${copy.root} && sandbox-harness runs --catalog shipping-service.yaml`);
  }
  return code;
}

export const demo = declareCommand(declaration, demoCommand);
