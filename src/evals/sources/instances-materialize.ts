/**
 * Instances into the one task shape every eval runs: per instance, under the eval's out
 * folder, a working copy at the base commit (with the test patch applied), a ticket (the
 * problem statement), a catalog made from the instance and the suite's defaults (editable:
 * everything but the test patch's files and the protected paths; the named tests decide), and,
 * for `--oracle`, a cassette that writes the gold patch's files. Downstream (trials, fleet,
 * reports, viewer) sees an ordinary suite.
 */
import { cp, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { literalGlob } from '../../changes/allowlist.js';
import { ConfigError } from '../../errors.js';
import { shellJoin } from '../../sandbox/shell.js';
import type { Suite, SuiteTask } from '../suite.js';
import { sha256 } from '../../changes/hash.js';
import type { Instance, InstanceSuite, RepoSpec } from './instances.js';
import { applyPatch, findLocalRepo, makeWorkingCopy, patchPaths, readPatchedFile } from './working-copy.js';
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
  /** Tests to leave out of FAIL_TO_PASS/PASS_TO_PASS, and instances whose gold patch fails. */
  quarantine?: Quarantine;
  onLine?: (line: string) => void;
}

export interface MaterializedInstances {
  suite: Suite;
  /** Instances left out because their gold patch fails (from the quarantine file). */
  goldFails: string[];
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
  const tasks: SuiteTask[] = [];
  const refusals: unknown[] = [];
  for (const instance of source.instances.instances) {
    if (goldFails.includes(instance.instance_id)) continue;
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
  if (tasks.length === 0)
    throw new ConfigError('every instance is left out (its gold patch fails, says the quarantine file)');
  const flags = JSON.stringify({ visible, oracle: options.oracle === true, quarantine: quarantine ?? null });
  return {
    suite: {
      file: source.file,
      sha256: sha256(`${source.sha256}\n${flags}`),
      name: source.name,
      defaults: source.defaults,
      tasks,
    },
    goldFails,
  };
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
  // The gold change is computed before the tests go in: it is a change of the base commit.
  const gold = o.oracle ? await goldChange(repoDir, instance) : undefined;
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
  // Visible tests are the agent's to read, never to change.
  if (o.visible && testFiles.length > 0) task.mustNotTouch = testFiles.map(literalGlob);
  if (gold) {
    const cassette = path.join(o.dir, 'oracle.json');
    await writeFile(cassette, `${JSON.stringify(oracleCassette(id, gold), null, 2)}\n`);
    task.cassettes = [cassette];
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

interface GoldFile {
  path: string;
  /** Undefined: the gold patch deletes it. */
  content?: string;
}

/** The files of the base commit as the gold patch leaves them (applied in a scratch copy of those files). */
async function goldChange(repoDir: string, instance: Instance): Promise<GoldFile[]> {
  const paths = patchPaths(instance.patch);
  const scratch = await mkdtemp(path.join(os.tmpdir(), 'sandbox-harness-gold-'));
  try {
    for (const p of paths) {
      if (existsSync(path.join(repoDir, p))) {
        await mkdir(path.dirname(path.join(scratch, p)), { recursive: true });
        await cp(path.join(repoDir, p), path.join(scratch, p));
      }
    }
    await applyPatch(scratch, instance.patch, `gold patch of ${instance.instance_id}`);
    const files: GoldFile[] = [];
    for (const p of paths) {
      const content = await readPatchedFile(scratch, p);
      files.push(content === undefined ? { path: p } : { path: p, content });
    }
    return files;
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }
}

/**
 * A recorded "model" that writes the gold patch's files and stops: the oracle goes through
 * the same gate and verification as any agent's change.
 */
export function oracleCassette(id: string, gold: readonly GoldFile[]): unknown {
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
      content: [{ type: 'text', text: `Applying the gold patch of ${id}.` }, ...writes, ...removes],
      stopReason: 'tool_use',
      usage: { inputTokens: 0, outputTokens: 0 },
    });
  turns.push({
    content: [{ type: 'text', text: 'The gold patch is applied.' }],
    stopReason: 'end_turn',
    usage: { inputTokens: 0, outputTokens: 0 },
  });
  return { version: 1, model: `oracle: the gold patch of ${id}`, turns };
}
