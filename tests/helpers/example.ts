/**
 * Copies of the bundled example for end-to-end tests, all under one scratch folder per
 * test file, so the file's afterAll removes every copy it made (and nothing else).
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { prepareExampleCopy, type ExampleCopy } from '../../src/demo.js';

let scratch: string | undefined;

/**
 * `fix OPS-412` of an example copy, live through `provider` (pointed at the fake model
 * server by the caller's environment), recorded as a cassette to `recording`, JSON out.
 */
export function liveFixArgs(
  copy: ExampleCopy,
  provider: 'anthropic' | 'openai',
  recording: string,
  ...extra: string[]
): string[] {
  return [
    'fix',
    'OPS-412',
    '--catalog',
    copy.catalog,
    '--provider',
    provider,
    '--model',
    'fake-model',
    '--record',
    recording,
    '--json',
    ...extra,
  ];
}

export async function exampleCopy(): Promise<ExampleCopy> {
  scratch ??= await mkdtemp(join(tmpdir(), 'sandbox-harness-e2e-'));
  return prepareExampleCopy({ parent: scratch });
}

export async function removeExampleCopies(): Promise<void> {
  if (scratch) await rm(scratch, { recursive: true, force: true });
  scratch = undefined;
}
