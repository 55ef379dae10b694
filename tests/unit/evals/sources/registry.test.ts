/**
 * The registry of task sources: what `eval` is given is read by the first source that
 * recognises it (the suite file last, taking the rest), a source flag a source does not take is
 * refused with the sources that do, and a fourth source plugs in without any other change.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { UsageError } from '../../../../src/errors.js';
import { summarize } from '../../../../src/evals/summary.js';
import {
  checkSourceFlags,
  recogniseSource,
  sourceInput,
  sourceLines,
  sourceReportSections,
  TASK_SOURCES,
} from '../../../../src/evals/sources/index.js';
import type { TaskSource } from '../../../../src/evals/sources/task-source.js';
import { fakeSuite, withTempDir } from '../helpers.js';

const byName = (name: string): TaskSource => {
  const source = TASK_SOURCES.find((s) => s.name === name);
  if (!source) throw new Error(`no source ${name}`);
  return source;
};

async function recognised(dir: string, name: string, content?: string): Promise<string> {
  const file = path.join(dir, name);
  if (content !== undefined) await writeFile(file, content);
  return (await recogniseSource(sourceInput(file, name, dir))).name;
}

describe('the task source registry', () => {
  it('names each source once', () => {
    const names = TASK_SOURCES.map((s) => s.name);
    expect(new Set(names).size).toBe(names.length);
    expect(names).toEqual(['instances', 'harbor', 'suite']);
  });

  it('hands each kind of input to its source, and whatever no other source reads to the suite file', async () => {
    await withTempDir(async (dir) => {
      await mkdir(path.join(dir, 'tasks'));
      expect(await recognised(dir, 'set.jsonl', '{}\n')).toBe('instances');
      // Not read: the name says it (a missing file is the instances loader's to report).
      expect(await recognised(dir, 'absent.jsonl')).toBe('instances');
      expect(await recognised(dir, 'instances.yaml', 'name: x\ninstances: set.jsonl\n')).toBe('instances');
      expect(await recognised(dir, 'harbor.yaml', 'name: x\nharbor: tasks\n')).toBe('harbor');
      expect(await recognised(dir, 'tasks')).toBe('harbor');
      expect(await recognised(dir, 'suite.yaml', 'name: x\ntasks: []\n')).toBe('suite');
      expect(await recognised(dir, 'absent.yaml')).toBe('suite');
      // A Harbor suite is YAML; the same key in a file of another kind is not one.
      expect(await recognised(dir, 'harbor.txt', 'harbor: tasks\n')).toBe('suite');
    });
  });

  it("reads the input's text once, however many sources look", async () => {
    await withTempDir(async (dir) => {
      const file = path.join(dir, 'suite.yaml');
      await writeFile(file, 'name: first\n');
      const input = sourceInput(file, 'suite.yaml', dir);
      expect(await input.text()).toBe('name: first\n');
      await writeFile(file, 'name: second\n');
      expect(await input.text()).toBe('name: first\n');
    });
  });

  it('refuses source flags a source does not take, naming every flag it does not take and who takes them', () => {
    const refused = (source: string, flags: Parameters<typeof checkSourceFlags>[1]) => {
      try {
        checkSourceFlags(byName(source), flags);
      } catch (error) {
        expect(error).toBeInstanceOf(UsageError);
        return (error as Error).message;
      }
      return undefined;
    };
    expect(refused('suite', { oracle: true })).toBe(
      '--repos, --visible-tests, --oracle, --quarantine and --predictions are for instances (JSONL) and Harbor task folders only',
    );
    expect(refused('harbor', { repos: '/clones' })).toBe(
      '--repos, --visible-tests, --quarantine and --predictions are for instances (JSONL) only',
    );
    expect(refused('harbor', { oracle: true })).toBeUndefined();
    expect(refused('harbor', { predictions: '/preds.jsonl' })).toBe(
      '--repos, --visible-tests, --quarantine and --predictions are for instances (JSONL) only',
    );
    expect(refused('suite', { visibleTests: false })).toBeUndefined();
    expect(
      refused('instances', { repos: '/clones', visibleTests: true, oracle: true, quarantine: '/q.json' }),
    ).toBeUndefined();
  });

  it('takes a fourth source by its interface alone: recognised before the suite file, named among the takers of its flag', async () => {
    const predictions: TaskSource = {
      name: 'predictions',
      title: 'predictions files',
      flags: ['oracle'],
      recognises: async (input) => input.file.endsWith('.predictions.json'),
      open: () => Promise.reject(new Error('not opened here')),
    };
    const sources = [predictions, ...TASK_SOURCES];
    const input = sourceInput('/x/run.predictions.json', 'run.predictions.json', '/x');
    expect(await recogniseSource(input, sources)).toBe(predictions);
    expect(() => checkSourceFlags(byName('suite'), { oracle: true }, sources)).toThrow(
      /are for predictions files, instances \(JSONL\) and Harbor task folders only$/,
    );
  });

  it('a summary without a section of a source shows nothing of it', () => {
    const summary = summarize([], {
      suite: fakeSuite(['a']),
      n: 1,
      startedAt: '2026-01-01T00:00:00.000Z',
      finishedAt: '2026-01-01T00:00:01.000Z',
      harnessVersion: '1.0.0',
    });
    expect(sourceReportSections(summary, 'after-task-tables')).toEqual([]);
    expect(sourceReportSections(summary, 'before-provenance')).toEqual([]);
    expect(sourceLines(summary, { quarantine: 'q.json' })).toEqual([]);
  });
});
