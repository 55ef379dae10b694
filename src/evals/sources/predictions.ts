/**
 * Another agent's patches, in SWE-bench's predictions format, to score instead of calling a
 * model: one JSON object per line (`instance_id`, `model_patch`, `model_name_or_path`), or a
 * JSON list of them, or a JSON object keyed by instance id. The file is hostile data: its size
 * and each patch's are bounded, and a prediction that cannot be used (a patch that is not a
 * string, no model name) is that instance's error with the reason, never the whole eval's.
 * What cannot be tied to an instance (a line that is not JSON, no instance id, an id given
 * twice) is the file's error, each at file:line.
 */
import { open } from 'node:fs/promises';
import { sha256 } from '../../changes/hash.js';
import { ConfigError } from '../../errors.js';
import { PASSING_CATEGORY, UNSCORED_CATEGORIES } from '../../outcomes.js';
import type { TrialResult } from '../types.js';

/** Above this the file is refused before it is read (SWE-bench's full test set is ~20 MB of patches). */
export const MAX_PREDICTIONS_BYTES = 256 * 1024 * 1024;
/** Above this one prediction's patch is that prediction's error. */
export const MAX_PATCH_BYTES = 8 * 1024 * 1024;
const MAX_MODEL_NAME = 200;
const INSTANCE_ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

/** One prediction: a patch and its model, or why it cannot be used. */
export type Prediction =
  | { instanceId: string; model: string; patch: string }
  | { instanceId: string; model?: string; error: string };

export interface Predictions {
  /** By instance id. */
  byId: Map<string, Prediction>;
  sha256: string;
}

/** Reads a predictions file (bounded; a fifo or a folder is refused). Throws ConfigError listing every problem. */
export async function loadPredictions(file: string, displayPath = file): Promise<Predictions> {
  let text: string;
  let handle;
  try {
    handle = await open(file, 'r');
  } catch (error) {
    throw new ConfigError(`cannot read predictions file ${displayPath}`, [], {
      cause: error,
      hint: 'pass a JSONL file, one {"instance_id", "model_patch", "model_name_or_path"} per line',
    });
  }
  try {
    const stat = await handle.stat();
    if (!stat.isFile()) throw new ConfigError(`predictions file ${displayPath} is not a regular file`);
    if (stat.size > MAX_PREDICTIONS_BYTES)
      throw new ConfigError(
        `predictions file ${displayPath} is ${stat.size} bytes; at most ${MAX_PREDICTIONS_BYTES} are read`,
      );
    // Read at most the bound even if the file grows after the look.
    const buffer = Buffer.alloc(Math.min(stat.size, MAX_PREDICTIONS_BYTES) + 1);
    const { bytesRead } = await handle.read(buffer, 0, buffer.length, 0);
    if (bytesRead > stat.size)
      throw new ConfigError(`predictions file ${displayPath} changed while it was read`);
    text = buffer.subarray(0, bytesRead).toString('utf8');
  } finally {
    await handle.close();
  }
  return { byId: parsePredictions(text, displayPath), sha256: sha256(text) };
}

/** The predictions of `text` by instance id; the file's problems (each at file:line) as one ConfigError. */
export function parsePredictions(text: string, displayPath: string): Map<string, Prediction> {
  const problems: string[] = [];
  const byId = new Map<string, Prediction>();
  const where = new Map<string, string>();
  const add = (raw: unknown, at: string, key?: string) => {
    const id = key ?? (isObject(raw) ? raw.instance_id : undefined);
    if (typeof id !== 'string' || !INSTANCE_ID.test(id)) {
      problems.push(
        `${at}: instance_id: expected an id of letters, digits, ".", "_" or "-" (at most 128), got ${describe(id)}`,
      );
      return;
    }
    const first = where.get(id);
    if (first !== undefined) {
      problems.push(`${at}: instance_id ${JSON.stringify(id)} has a prediction already (at ${first})`);
      return;
    }
    where.set(id, at);
    byId.set(id, onePrediction(id, raw));
  };
  const whole = looksLikeJsonl(text) ? undefined : wholeJson(text);
  if (whole !== undefined) {
    const json = whole.value;
    if (Array.isArray(json)) json.forEach((item, i) => add(item, `${displayPath}: item ${i + 1}`));
    else if (isObject(json))
      for (const [key, value] of Object.entries(json)) {
        // SWE-bench's dict form keys each prediction by its instance id.
        if (isObject(value) && value.instance_id !== undefined && value.instance_id !== key)
          problems.push(
            `${displayPath}: key ${JSON.stringify(key)}: instance_id says ${describe(value.instance_id)}`,
          );
        else add(value, `${displayPath}: key ${JSON.stringify(key).slice(0, 140)}`, key);
      }
  } else {
    text.split('\n').forEach((raw, index) => {
      if (raw.trim() === '') return;
      const at = `${displayPath}:${index + 1}`;
      let json: unknown;
      try {
        json = JSON.parse(raw);
      } catch (error) {
        problems.push(`${at}: not a JSON object (${messageOf(error)})`);
        return;
      }
      add(json, at);
    });
  }
  if (problems.length === 0 && byId.size === 0) problems.push(`${displayPath}: no predictions in the file`);
  if (problems.length > 0) {
    const shown = problems.slice(0, 50);
    throw new ConfigError(
      [
        `${displayPath} is not a valid predictions file (${problems.length} problem(s)):`,
        ...shown.map((p) => `  ${p}`),
        ...(problems.length > shown.length ? [`  ... and ${problems.length - shown.length} more`] : []),
      ].join('\n'),
      problems,
      { hint: FORMAT_HINT },
    );
  }
  return byId;
}

const FORMAT_HINT =
  'one JSON object per line: {"instance_id": ..., "model_patch": "<unified diff>", "model_name_or_path": ...}';

/** A prediction whose instance is known: its patch and model, or why it cannot be scored. */
function onePrediction(instanceId: string, raw: unknown): Prediction {
  if (!isObject(raw)) return { instanceId, error: `expected a JSON object, got ${describe(raw)}` };
  const name = raw.model_name_or_path;
  if (typeof name !== 'string' || name.trim() === '')
    return { instanceId, error: `model_name_or_path: expected the model's name, got ${describe(name)}` };
  const model = cleanModelName(name);
  const patch = raw.model_patch;
  // SWE-bench writes null (or "") for an agent that produced nothing: an empty patch, scored.
  if (patch === null || patch === undefined) return { instanceId, model, patch: '' };
  if (typeof patch !== 'string')
    return { instanceId, model, error: `model_patch: expected a unified diff, got ${describe(patch)}` };
  if (Buffer.byteLength(patch, 'utf8') > MAX_PATCH_BYTES)
    return { instanceId, model, error: `model_patch is larger than ${MAX_PATCH_BYTES} bytes` };
  return { instanceId, model, patch };
}

/** The name as reports show it: no control characters, bounded. */
function cleanModelName(name: string): string {
  // eslint-disable-next-line no-control-regex
  const clean = name.replace(/[\u0000-\u001f\u007f-\u009f]/g, ' ').trim();
  return clean.length > MAX_MODEL_NAME ? `${clean.slice(0, MAX_MODEL_NAME)}...` : clean;
}

export interface PredictionMatch {
  /** Instances of the suite with no prediction: not run, named in the summary. */
  noPrediction: string[];
  /** Predictions naming no instance of the suite. */
  unknown: string[];
}

/** Which instances have no prediction and which predictions name no instance. */
export function matchPredictions(
  predictions: Map<string, Prediction>,
  instanceIds: readonly string[],
): PredictionMatch {
  const known = new Set(instanceIds);
  return {
    noPrediction: instanceIds.filter((id) => !predictions.has(id)),
    unknown: [...predictions.keys()].filter((id) => !known.has(id)).sort(),
  };
}

/** Whether the first line is one prediction (JSONL); a pretty-printed list or dict's first line is not. */
function looksLikeJsonl(text: string): boolean {
  const first = text.trimStart().split('\n', 1)[0]!.trim();
  try {
    const json: unknown = JSON.parse(first);
    return isObject(json) && PREDICTION_KEYS.some((key) => key in json);
  } catch {
    return false;
  }
}

const PREDICTION_KEYS = ['instance_id', 'model_patch', 'model_name_or_path'];

/** The text as one JSON list or object; undefined when it is not (then it is read as JSONL, line by line). */
function wholeJson(text: string): { value: unknown } | undefined {
  const trimmed = text.trimStart();
  if (!trimmed.startsWith('[') && !trimmed.startsWith('{')) return undefined;
  try {
    return { value: JSON.parse(trimmed) as unknown };
  } catch {
    return undefined;
  }
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function describe(value: unknown): string {
  if (value === undefined) return 'nothing';
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'a list';
  if (typeof value === 'string')
    return JSON.stringify(value.length > 60 ? `${value.slice(0, 60)}...` : value);
  return typeof value === 'object' ? 'an object' : `${typeof value} ${String(value)}`;
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message.slice(0, 200) : String(error);
}

/** SWE-bench's own report keys (its harness's final report), beside the harness's summary. */
export interface SwebenchReport {
  total_instances: number;
  submitted_instances: number;
  completed_instances: number;
  resolved_instances: number;
  unresolved_instances: number;
  empty_patch_instances: number;
  error_instances: number;
  submitted_ids: string[];
  completed_ids: string[];
  incomplete_ids: string[];
  empty_patch_ids: string[];
  resolved_ids: string[];
  unresolved_ids: string[];
  error_ids: string[];
}

/**
 * The results counted as SWE-bench counts them: an empty patch is `empty_patch` (not
 * completed), an instance with no prediction `incomplete`, one whose trial ended unscored
 * (a patch that did not apply, the environment) `error`; a completed instance is resolved when
 * every one of its trials passed.
 */
export function swebenchReport(
  instanceIds: readonly string[],
  found: { noPrediction: readonly string[]; emptyPatch: readonly string[] },
  results: readonly TrialResult[],
): SwebenchReport {
  const submitted = instanceIds.filter((id) => !found.noPrediction.includes(id));
  const ids = { resolved: [] as string[], unresolved: [] as string[], error: [] as string[] };
  const incomplete = [...found.noPrediction];
  for (const id of submitted) {
    if (found.emptyPatch.includes(id)) continue;
    const trials = results.filter((r) => r.taskId === id);
    if (trials.length === 0) incomplete.push(id);
    else if (trials.some((r) => UNSCORED_CATEGORIES.has(r.category))) ids.error.push(id);
    else if (trials.every((r) => r.category === PASSING_CATEGORY)) ids.resolved.push(id);
    else ids.unresolved.push(id);
  }
  const completed = [...ids.resolved, ...ids.unresolved];
  return {
    total_instances: instanceIds.length,
    submitted_instances: submitted.length,
    completed_instances: completed.length,
    resolved_instances: ids.resolved.length,
    unresolved_instances: ids.unresolved.length,
    empty_patch_instances: found.emptyPatch.length,
    error_instances: ids.error.length,
    submitted_ids: submitted,
    completed_ids: completed.sort(),
    incomplete_ids: incomplete.sort(),
    empty_patch_ids: [...found.emptyPatch],
    resolved_ids: ids.resolved,
    unresolved_ids: ids.unresolved,
    error_ids: ids.error,
  };
}
