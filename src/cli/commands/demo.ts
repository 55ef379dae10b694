import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { prepareExampleCopy } from '../../demo.js';
import { fixCommand } from './fix.js';
import { print, note, type CliContext } from '../context.js';

export interface DemoOptions {
  provider?: string;
  model?: string;
  keep?: string;
  json?: boolean;
  /** With an independent checker; offline, the cassette that has a review round. */
  review?: boolean;
}

/**
 * Runs the bundled shipping-service example: a temporary copy, the recorded cassette
 * (or a live provider), then the outcome, the patch and where the run record is.
 */
export async function demoCommand(ctx: CliContext, options: DemoOptions): Promise<number> {
  if (!options.json) note(ctx, 'preparing a temporary copy of examples/shipping-service ...');
  const copy = await prepareExampleCopy();
  const live = options.provider !== undefined && options.provider !== 'replay';
  const cassette = options.review ? 'OPS-412-review.json' : 'OPS-412.json';
  if (!options.json) {
    note(ctx, `example copy: ${copy.root}`);
    note(
      ctx,
      live
        ? `model: ${options.provider} (live)`
        : `model: the recorded cassette cassettes/${cassette} (offline)`,
    );
  }
  // Paths are absolute, so the run record is shown by its full path, not relative to the copy.
  const code = await fixCommand(ctx, 'OPS-412', {
    catalog: copy.catalog,
    ...(live ? { provider: options.provider } : { cassette: join(copy.cassettes, cassette) }),
    ...(options.review ? { review: true } : {}),
    ...(options.model ? { model: options.model } : {}),
    keep: options.keep ?? 'on-failure',
    ...(options.json ? { json: true } : {}),
  });
  if (!options.json) {
    const source = await readFile(join(copy.repo, 'src', 'shipping.ts'), 'utf8');
    const line = source.split('\n').find((l) => l.includes('FREE_SHIPPING_THRESHOLD ='));
    print(ctx, `\nthe example copy's src/shipping.ts now says: ${line?.trim() ?? '(no threshold line)'}`);
    print(ctx, `explore it: cd ${copy.root} && sandbox-harness runs --catalog shipping-service.yaml`);
  }
  return code;
}
