/**
 * The agent of a trial: a suite task may name its own (`agent:` in the suite file), `eval
 * --agent` wins over it, and every trial's result says which agent worked it (from its run
 * record, which names the kind). In-memory sandboxes and a scripted model: no engine.
 */
import { rm } from 'node:fs/promises';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { fixTrialRunner } from '../../../src/evals/fix-trial.js';
import { parseSuite } from '../../../src/evals/sources/suite-source.js';
import { trialSpecs } from '../../../src/evals/suite.js';
import type { TrialSpec } from '../../../src/evals/types.js';
import { ConfigError, NodeFailure } from '../../../src/errors.js';
import { resolveRun } from '../../../src/runs/record.js';
import { fixingTurns, memoryExample } from '../../helpers/memory-run.js';
import { scripted } from '../agent/helpers.js';

const roots: string[] = [];
afterEach(async () => {
  for (const root of roots.splice(0)) await rm(root, { recursive: true, force: true });
});

/** The one trial these tests run: the example's ticket, replayed. */
function specOf(catalog: string, agent?: string): TrialSpec {
  return {
    taskId: 't',
    trial: 0,
    catalog,
    ticket: 'OPS-412',
    provider: 'replay',
    ...(agent ? { agent } : {}),
  };
}

async function trial(agent: string | undefined, everyTrial?: string) {
  const example = await memoryExample();
  roots.push(example.root);
  const run = fixTrialRunner({
    outDir: path.join(example.root, 'out'),
    keep: 'never',
    deps: example.deps(scripted(fixingTurns)),
    env: example.env,
    ...(everyTrial ? { agent: everyTrial } : {}),
  });
  const result = await run(specOf(example.catalog, agent), {
    signal: new AbortController().signal,
    engine: 'local',
  });
  return { result, outDir: path.join(example.root, 'out') };
}

describe("a trial's agent", () => {
  it('is named in the run record and the trial result', async () => {
    const { result, outDir } = await trial(undefined);
    expect(result.category, result.error).toBe('ready-for-review');
    expect(result.agent).toBe('builtin');
    const stored = await resolveRun(path.join(outDir, 'runs'), result.runId!);
    expect(stored.record.agent).toBe('builtin');
  });

  it("is the suite task's own when it names one, and eval --agent wins over it", async () => {
    // The command agent needs the catalog's agent.command: the task's choice reached the run.
    const own = await trial('command');
    expect(own.result.category).toBe('error');
    expect(own.result.error).toMatch(/the command agent needs the catalog's agent.command/);
    const overridden = await trial('command', 'builtin');
    expect(overridden.result.category, overridden.result.error).toBe('ready-for-review');
    expect(overridden.result.agent).toBe('builtin');
  });
});

describe('the suite file', () => {
  const file = path.resolve('examples/evals/suite.yaml');
  const suite = (agent: string) =>
    `name: s\ntasks:\n  - id: a\n    catalog: shipping-eval.yaml\n    ticket: t\n    agent: ${agent}\n`;

  it("carries a task's agent into every one of its trials", () => {
    const specs = trialSpecs(parseSuite(file, suite('codex')), 2);
    expect(specs.map((s) => s.agent)).toEqual(['codex', 'codex']);
  });

  it('refuses an agent it does not know, with the list', () => {
    expect(() => parseSuite(file, suite('aider'))).toThrow(ConfigError);
    try {
      parseSuite(file, suite('aider'));
    } catch (error) {
      expect((error as ConfigError).problems.join('\n')).toMatch(
        /tasks\[0\]\.agent: expected one of builtin, claude-code, codex, command/,
      );
    }
  });
});

describe('a trial ended by a lost node', () => {
  // The eval's baseline runs in whichever job is held, so a run can fail on a node that is not
  // its attempt's: the result (and so a retry's first try) names the node that was lost.
  it('names the lost node as where it failed, not the engine it was placed on', async () => {
    const example = await memoryExample();
    roots.push(example.root);
    const run = fixTrialRunner({
      outDir: path.join(example.root, 'out'),
      keep: 'never',
      deps: (() => {
        const deps = example.deps(scripted(fixingTurns));
        const backend = deps.backend;
        const create = backend.create.bind(backend);
        backend.create = async (spec) => {
          if (spec.role === 'baseline') throw new NodeFailure('node7', "the sandbox's node node7 was lost");
          return create(spec);
        };
        return deps;
      })(),
      env: example.env,
    });
    const result = await run(specOf(example.catalog), {
      signal: new AbortController().signal,
      engine: 'slurm',
    });
    expect(result.category, result.error).toBe('infrastructure');
    expect(result.error).toMatch(/node7 was lost/);
    expect(result.engine).toBe('node7');
  });
});
