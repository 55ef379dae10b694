/**
 * Running the catalog's test command in a sandbox: layers in order, stopping at the first
 * that fails, with output kept for the run record and a tail for the model's feedback.
 */
import type { Sandbox } from '../sandbox/types.js';
import { formatDuration } from '../format.js';

export interface TestLayer {
  name: string;
  command: string;
}

export interface LayerResult {
  name: string;
  command: string;
  exitCode: number;
  timedOut: boolean;
  durationMs: number;
  output: string;
}

export interface TestRun {
  passed: boolean;
  failingLayer?: LayerResult;
  layers: LayerResult[];
  durationMs: number;
}

export async function runTestLayers(
  sandbox: Sandbox,
  layers: readonly TestLayer[],
  options: {
    timeoutMs: number;
    signal?: AbortSignal;
    onLayer?: (layer: TestLayer) => void;
    /** Output kept per layer (head and tail); default 1 MiB. */
    maxOutputBytes?: number;
  },
): Promise<TestRun> {
  const results: LayerResult[] = [];
  const started = Date.now();
  for (const layer of layers) {
    options.onLayer?.(layer);
    const result = await sandbox.exec(layer.command, {
      timeoutMs: options.timeoutMs,
      maxOutputBytes: options.maxOutputBytes ?? 1024 * 1024,
      ...(options.signal ? { signal: options.signal } : {}),
    });
    const output = [result.stdout, result.stderr]
      .filter((s) => s !== '')
      .join(result.stdout.endsWith('\n') ? '' : '\n');
    const layerResult: LayerResult = {
      name: layer.name,
      command: layer.command,
      exitCode: result.exitCode,
      timedOut: result.timedOut,
      durationMs: result.durationMs,
      output,
    };
    results.push(layerResult);
    if (result.exitCode !== 0) {
      return { passed: false, failingLayer: layerResult, layers: results, durationMs: Date.now() - started };
    }
  }
  return { passed: true, layers: results, durationMs: Date.now() - started };
}

/** The whole output of a test run, as saved in `attempts/<n>/test-output.txt`. */
export function formatTestRun(run: TestRun): string {
  return run.layers
    .map(
      (l) =>
        `=== layer ${l.name}: $ ${l.command}\n${l.output}${l.output.endsWith('\n') || l.output === '' ? '' : '\n'}` +
        `=== exit ${l.exitCode}${l.timedOut ? ' (timed out)' : ''} after ${formatDuration(l.durationMs)}\n`,
    )
    .join('\n');
}

/** Keeps the last `bytes` of a text on a line boundary where possible. */
export function tail(text: string, bytes: number): string {
  const buffer = Buffer.from(text, 'utf8');
  if (buffer.length <= bytes) return text;
  let cut = buffer.subarray(buffer.length - bytes).toString('utf8');
  const newline = cut.indexOf('\n');
  if (newline >= 0 && newline < 200) cut = cut.slice(newline + 1);
  return `[... earlier output cut; last ${bytes} bytes follow ...]\n${cut}`;
}

/** Feedback for the model after its change failed verification. */
export function failureFeedback(run: TestRun, tailBytes: number, layerCount: number): string {
  const failing = run.failingLayer;
  if (!failing) return '';
  const which = layerCount > 1 ? ` in layer "${failing.name}"` : '';
  const how = failing.timedOut ? 'timed out' : `exited with code ${failing.exitCode}`;
  return (
    `Your change was applied to a fresh copy of the repository and the tests failed${which}: ` +
    `\`${failing.command}\` ${how}. Only your changes to the editable files were carried over.\n` +
    `Last part of the output:\n${tail(failing.output, tailBytes)}`
  );
}
