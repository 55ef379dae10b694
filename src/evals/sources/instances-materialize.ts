/**
 * Instances into the one task shape every eval runs: per instance, under the eval's out
 * folder, a working copy at the base commit (with the test patch applied), a ticket (the
 * problem statement), a catalog made from the instance and the suite's defaults (editable:
 * everything but the test patch's files and the protected paths; the named tests decide), and,
 * for `--oracle`, a cassette that writes the gold patch's files (for `--predictions`, the
 * prediction's patch, under its model's name). Downstream (trials, fleet,
 * reports, viewer) sees an ordinary suite.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { literalGlob } from '../../changes/allowlist.js';
import { ConfigError } from '../../errors.js';
import { shellJoin } from '../../sandbox/shell.js';
import type { Suite, SuiteTask } from '../suite.js';
import { sha256 } from '../../changes/hash.js';
import type { Instance, InstanceSuite, RepoSpec } from './instances.js';
import {
  applyPatch,
  findLocalRepo,
  makeWorkingCopy,
  patchedFiles,
  patchPaths,
  type PatchedFile,
} from './working-copy.js';
import { matchPredictions, type Predictions, type Prediction } from './predictions.js';
import type { Quarantine } from './quarantine.js';
import { taskRefusal } from '../task-refusals.js';
import { chooseEnvironment, instanceLineEnvironment, type Environment } from './instance-environment.js';

export interface MaterializeOptions {
  /** The eval's out folder; instances go to `<out>/instances/<id>/`. */
  outDir: string;
  /** `--repos` (overrides the suite's). */
  repos?: string;
  /** `--visible-tests` (overrides the suite's). */
  visibleTests?: boolean;
  oracle?: boolean;
  /** `--predictions`: each instance's patch from another agent instead of a model. */
  predictions?: Predictions;
  /** Tests to leave out of FAIL_TO_PASS/PASS_TO_PASS, and instances whose gold patch fails. */
  quarantine?: Quarantine;
  onLine?: (line: string) => void;
}

export interface MaterializedInstances {
  suite: Suite;
  /** Instances left out because their gold patch fails (from the quarantine file). */
  goldFails: string[];
  /** With predictions: what the file held beside the patches that were scored. */
  predictions?: PredictionsFound;
}

/** What a predictions file held beside the patches that ran (for the summary). */
export interface PredictionsFound {
  /** Every model named by a prediction of an instance of the suite. */
  models: string[];
  /** Instances with no prediction: not run, not scored. */
  noPrediction: string[];
  /** Predictions naming no instance of the suite. */
  unknown: string[];
  /** Instances whose prediction is an empty patch (scored as not resolved, `no-changes`, never run). */
  emptyPatch: string[];
  /**
   * Per instance, the test patch's files a prediction changed: reset before the test patch
   * goes in, as SWE-bench's harness resets them (`git checkout <base> <test files>`), so the
   * rest of the prediction is scored.
   */
  testEditsReset: Record<string, string[]>;
}

export async function materializeInstances(
  source: InstanceSuite,
  options: MaterializeOptions,
): Promise<MaterializedInstances> {
  const reposDir = options.repos ?? source.repos;
  if (!reposDir)
    throw new ConfigError('no folder of local clones for the instances', [], {
      hint: 'pass --repos DIR (or set repos: in the instance suite); evals never clone over the network',
    });
  const visible = options.visibleTests ?? source.visibleTests;
  const quarantine = options.quarantine;
  const goldFails = options.oracle
    ? []
    : (quarantine?.goldFails ?? []).filter((id) =>
        source.instances.instances.some((i) => i.instance_id === id),
      );
  const found = options.predictions
    ? predictionsFound(
        options.predictions,
        source.instances.instances.map((i) => i.instance_id),
      )
    : undefined;
  const tasks: SuiteTask[] = [];
  const refusals: unknown[] = [];
  for (const instance of source.instances.instances) {
    if (goldFails.includes(instance.instance_id)) continue;
    if (found?.noPrediction.includes(instance.instance_id)) continue;
    options.onLine?.(
      `preparing instance ${instance.instance_id} (${instance.repo}@${instance.base_commit.slice(0, 12)})`,
    );
    const dir = path.join(options.outDir, 'instances', instance.instance_id);
    try {
      tasks.push(
        await materializeOne(instance, {
          reposDir,
          spec: specFor(source, instance),
          suiteEnvironment: source.environment,
          suiteDir: path.dirname(source.file),
          dir,
          visible,
          oracle: options.oracle === true,
          ...(options.predictions ? { prediction: options.predictions.byId.get(instance.instance_id) } : {}),
          ...(found
            ? { onTestEditsReset: (files: string[]) => (found.testEditsReset[instance.instance_id] = files) }
            : {}),
          quarantined: quarantine?.tests[instance.instance_id] ?? [],
          ...(options.onLine ? { onLine: options.onLine } : {}),
          ...(source.cassettes ? { cassettes: source.cassettes } : {}),
        }),
      );
    } catch (error) {
      // One instance's repo, commit or patch is that instance's error; the others run.
      const reason = taskRefusal(error);
      if (reason === undefined) throw error;
      refusals.push(error);
      options.onLine?.(`  refused: ${reason}`);
      tasks.push({
        id: instance.instance_id,
        catalog: path.join(dir, 'catalog.yaml'),
        ticket: path.join(dir, 'ticket.md'),
        refused: reason,
      });
    }
  }
  // Nothing to run at all: the one reason is the eval's.
  if (tasks.length > 0 && tasks.every((t) => t.refused !== undefined)) throw refusals[0];
  if (tasks.length === 0 && found)
    throw new ConfigError('no prediction names an instance of the suite', [], {
      hint: `the file's instance ids: ${found.unknown.slice(0, 10).join(', ')}`,
    });
  if (tasks.length === 0)
    throw new ConfigError('every instance is left out (its gold patch fails, says the quarantine file)');
  const flags = JSON.stringify({
    visible,
    oracle: options.oracle === true,
    quarantine: quarantine ?? null,
    // Other predictions are another eval: resume refuses them.
    ...(options.predictions ? { predictions: options.predictions.sha256 } : {}),
  });
  return {
    suite: {
      file: source.file,
      sha256: sha256(`${source.sha256}\n${flags}`),
      name: source.name,
      defaults: source.defaults,
      tasks,
    },
    goldFails,
    ...(found ? { predictions: found } : {}),
  };
}

function predictionsFound(predictions: Predictions, instanceIds: readonly string[]): PredictionsFound {
  const match = matchPredictions(predictions.byId, instanceIds);
  const scored = instanceIds.flatMap((id) => {
    const p = predictions.byId.get(id);
    return p ? [p] : [];
  });
  return {
    models: [...new Set(scored.flatMap((p) => (p.model !== undefined ? [p.model] : [])))].sort(),
    ...match,
    emptyPatch: scored.flatMap((p) => (isEmptyPatch(p) ? [p.instanceId] : [])),
    testEditsReset: {},
  };
}

/** A usable prediction whose patch changes nothing (SWE-bench's `empty_patch`). */
function isEmptyPatch(prediction: Prediction): boolean {
  return 'patch' in prediction && prediction.patch.trim() === '';
}

function specFor(source: InstanceSuite, instance: Instance): RepoSpec {
  const spec = source.repoSpecs[instance.repo] ?? source.repoSpecs[instance.repo.split('/').pop()!];
  if (instance.test_command) {
    return {
      testReport: 'reports/junit.xml',
      carry: [],
      maxAttempts: 1,
      rules: {},
      ...spec,
      testCommand: instance.test_command,
    };
  }
  if (!spec)
    throw new ConfigError(`instance ${instance.instance_id}: no test command for ${instance.repo}`, [], {
      hint: `add repoSpecs: {"${instance.repo}": {testCommand: ..., testReport: reports/junit.xml}} to the instance suite, or test_command to the instance`,
    });
  return spec;
}

interface OneOptions {
  reposDir: string;
  spec: RepoSpec;
  suiteEnvironment: Environment | undefined;
  /** Where the suite's paths (a Dockerfile) are relative to. */
  suiteDir: string;
  dir: string;
  visible: boolean;
  oracle: boolean;
  /** With predictions: this instance's (there is one: instances without are left out before). */
  prediction?: Prediction | undefined;
  /** Called with the test patch's files the prediction changed (their changes are dropped). */
  onTestEditsReset?: (files: string[]) => void;
  quarantined: readonly string[];
  cassettes?: string;
  onLine?: (line: string) => void;
}

async function materializeOne(instance: Instance, o: OneOptions): Promise<SuiteTask> {
  const id = instance.instance_id;
  const clone = await findLocalRepo(o.reposDir, instance.repo);
  const repoDir = path.join(o.dir, 'repo');
  await mkdir(o.dir, { recursive: true });
  const copy = await makeWorkingCopy(clone, instance.base_commit, repoDir, o.spec.carry);
  if (copy.from === 'folder')
    o.onLine?.(
      `  ${clone} is not a git clone: copied as it is (base_commit ${instance.base_commit} not checked)`,
    );
  const testFiles = patchPaths(instance.test_patch);
  const goldFiles = patchPaths(instance.patch);
  const overlap = goldFiles.filter((f) => testFiles.includes(f));
  if (overlap.length > 0)
    throw new ConfigError(`instance ${id}: the gold patch changes test patch files (${overlap.join(', ')})`);
  // The change is computed before the tests go in: it is a change of the base commit.
  const change = o.oracle
    ? {
        files: await patchedFiles(repoDir, instance.patch, `gold patch of ${id}`),
        model: `oracle: the gold patch of ${id}`,
        what: `the gold patch of ${id}`,
      }
    : o.prediction
      ? await predictionChange(repoDir, o.prediction, testFiles, o.onTestEditsReset)
      : undefined;
  await applyPatch(repoDir, instance.test_patch, `test_patch of ${id}`);
  const environment = await chooseEnvironment(
    [
      { env: instanceLineEnvironment(instance), from: `instance ${id}`, base: o.suiteDir },
      { env: o.spec, from: `repoSpecs of ${instance.repo}`, base: o.suiteDir },
      { env: o.suiteEnvironment, from: 'the instance suite', base: o.suiteDir },
    ],
    repoDir,
    o.dir,
  );
  o.onLine?.(`  environment: ${describeEnvironment(environment.sandbox)} (${environment.from})`);

  const heldOut = o.visible ? [] : testFiles.map(literalGlob);
  const catalog = {
    name: id,
    owner: `instance ${id} of ${instance.repo} at ${instance.base_commit}`,
    repo: 'repo',
    rules: o.spec.rules,
    agent: {
      editableFiles: o.spec.editableFiles ?? ['**'],
      testCommand: o.spec.testCommand,
      maxAttempts: o.spec.maxAttempts,
      maxTurns: o.spec.maxTurns,
      heldOutTests: heldOut,
      testReport: {
        ...(o.spec.testLog ? { format: o.spec.testLog } : { format: 'junit', path: o.spec.testReport }),
        failToPass: instance.FAIL_TO_PASS,
        passToPass: instance.PASS_TO_PASS,
        quarantined: [...o.quarantined],
      },
    },
    sandbox: {
      ...environment.sandbox,
      ...(o.spec.testSec !== undefined ? { timeouts: { testSec: o.spec.testSec } } : {}),
      ...(o.spec.egress ? { egress: o.spec.egress } : {}),
    },
  };
  const catalogFile = path.join(o.dir, 'catalog.yaml');
  // JSON is YAML: the catalog loader reads it with its usual file:line errors.
  await writeFile(catalogFile, `${JSON.stringify(catalog, null, 2)}\n`);
  const ticketFile = path.join(o.dir, 'ticket.md');
  await writeFile(ticketFile, `---\nid: ${JSON.stringify(id)}\n---\n${instance.problem_statement.trim()}\n`);

  const task: SuiteTask = { id, catalog: catalogFile, ticket: ticketFile, repo: repoDir };
  // An empty patch is not run (SWE-bench's `empty_patch`): its trials are `no-changes` as they stand.
  if (o.prediction && isEmptyPatch(o.prediction))
    task.settled = { category: 'no-changes', reason: 'an empty patch', model: o.prediction.model };
  // Visible tests are the agent's to read, never to change.
  if (o.visible && testFiles.length > 0) task.mustNotTouch = testFiles.map(literalGlob);
  if (change) {
    const cassette = path.join(o.dir, o.oracle ? 'oracle.json' : 'prediction.json');
    await writeFile(cassette, `${JSON.stringify(changeCassette(change), null, 2)}\n`);
    task.cassettes = [cassette];
    task.patchOnly = true;
  } else if (o.cassettes) {
    const recorded = path.join(o.cassettes, `${id}.json`);
    if (existsSync(recorded)) task.cassettes = [recorded];
  }
  return task;
}

function describeEnvironment(sandbox: { image?: string; baseImage?: string; dockerfile?: string }): string {
  if (sandbox.image) return `the image ${sandbox.image}, as it is`;
  if (sandbox.baseImage) return `built on ${sandbox.baseImage}`;
  if (sandbox.dockerfile) return 'built with its Dockerfile';
  return "built on the harness's default base";
}

/**
 * A prediction's patch as files, under its model's name; a prediction that cannot be used, or
 * whose patch cannot (outside the repo, through a link, does not apply), is this instance's
 * error with the reason. Its changes to the test patch's files are dropped (`onReset` is told
 * which): SWE-bench resets those files to the base commit before it applies the test patch.
 */
async function predictionChange(
  repoDir: string,
  prediction: Prediction,
  testFiles: readonly string[],
  onReset?: (files: string[]) => void,
): Promise<Change> {
  const id = prediction.instanceId;
  const who = `the prediction of ${prediction.model ?? 'a model'} for ${id}`;
  if ('error' in prediction) throw new ConfigError(`${who}: ${prediction.error}`);
  try {
    const files = await patchedFiles(repoDir, prediction.patch, 'model_patch');
    const reset = files.filter((f) => testFiles.includes(f.path)).map((f) => f.path);
    if (reset.length > 0) onReset?.(reset);
    return {
      files: files.filter((f) => !testFiles.includes(f.path)),
      model: prediction.model,
      what: `the model_patch of ${prediction.model}`,
    };
  } catch (error) {
    if (error instanceof ConfigError) throw new ConfigError(`${who}: ${error.message}`);
    throw error;
  }
}

/** A change to replay: files as a patch leaves them, the model name results show, what the cassette says. */
interface Change {
  files: readonly PatchedFile[];
  model: string;
  what: string;
}

/**
 * A recorded "model" that writes the gold patch's files and stops: the oracle goes through
 * the same gate and verification as any agent's change.
 */
export function oracleCassette(id: string, gold: readonly PatchedFile[]): unknown {
  return changeCassette({
    files: gold,
    model: `oracle: the gold patch of ${id}`,
    what: `the gold patch of ${id}`,
  });
}

/**
 * A recorded "model" that writes a patch's files and stops: the oracle's gold patch and another
 * agent's prediction go through the same gate and verification as any agent's change.
 */
export function changeCassette({ files, model, what }: Change): unknown {
  const gold = files;
  const writes = gold
    .filter((f) => f.content !== undefined)
    .map((f, i) => ({
      type: 'tool_use',
      id: `gold-${i + 1}`,
      name: 'write_file',
      input: { path: f.path, content: f.content },
    }));
  const deleted = gold.filter((f) => f.content === undefined).map((f) => f.path);
  const removes = deleted.length
    ? [
        {
          type: 'tool_use',
          id: 'gold-rm',
          name: 'run_command',
          input: { command: `rm -f -- ${shellJoin(deleted)}` },
        },
      ]
    : [];
  const turns = [];
  if (writes.length + removes.length > 0)
    turns.push({
      content: [{ type: 'text', text: `Applying ${what}.` }, ...writes, ...removes],
      stopReason: 'tool_use',
      usage: { inputTokens: 0, outputTokens: 0 },
    });
  turns.push({
    content: [{ type: 'text', text: `Applied ${what}.` }],
    stopReason: 'end_turn',
    usage: { inputTokens: 0, outputTokens: 0 },
  });
  return { version: 1, model, turns };
}
