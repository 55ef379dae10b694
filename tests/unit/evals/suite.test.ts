import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { ConfigError } from '../../../src/errors.js';
import { loadSuite, parseSuite } from '../../../src/evals/sources/suite-source.js';
import { cassetteFor, trialSpecs } from '../../../src/evals/suite.js';

const fixtures = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../fixtures/suites');
const basic = path.join(fixtures, 'basic');

async function loadError(file: string, options = {}): Promise<ConfigError> {
  try {
    await loadSuite(file, options);
  } catch (error) {
    if (error instanceof ConfigError) return error;
    throw error;
  }
  throw new Error('expected the suite to be refused');
}

describe('loadSuite with a valid suite', () => {
  it('resolves catalog, repo and cassette paths against the suite file, not the working directory', async () => {
    const suite = await loadSuite(path.join(basic, 'suite.yaml'));
    const [add, sub] = suite.tasks;
    expect(add?.catalog).toBe(path.join(basic, 'catalogs/calc.yaml'));
    expect(sub?.catalog).toBe(path.join(basic, 'catalogs/calc.yaml'));
    expect(add?.repo).toBe(path.join(basic, 'repos/calc'));
    expect(add?.cassettes).toEqual([path.join(basic, 'cassettes/fix-add-0.json')]);
    expect(sub?.cassettes).toEqual([
      path.join(basic, 'cassettes/fix-sub-0.json'),
      path.join(basic, 'cassettes/fix-sub-1.json'),
    ]);
    expect(suite.file).toBe(path.join(basic, 'suite.yaml'));
  });

  it('turns a ticket naming a file into an absolute path and keeps ids and inline text as written', async () => {
    const suite = await loadSuite(path.join(basic, 'suite.yaml'));
    expect(suite.tasks.map((t) => t.ticket)).toEqual([
      path.join(basic, 'tickets/fix-add.md'),
      'Subtraction returns the wrong sign for negative numbers.',
      'PROJ-7',
    ]);
  });

  it('records the sha256 of the file bytes', async () => {
    const file = path.join(basic, 'suite.yaml');
    const suite = await loadSuite(file);
    expect(suite.sha256).toBe(createHash('sha256').update(readFileSync(file)).digest('hex'));
  });

  it('reads the defaults that were given', async () => {
    const suite = await loadSuite(path.join(basic, 'suite.yaml'));
    expect(suite.name).toBe('basic');
    expect(suite.defaults).toEqual({
      provider: 'replay',
      model: 'recorded-model',
      n: 3,
      concurrency: 2,
      timeouts: { trialSec: 600 },
      keep: 'on-failure',
    });
    expect(suite.tasks[1]?.mustNotTouch).toEqual(['test/**']);
  });

  it('fills n = 1, concurrency = core count and keep = never when defaults are omitted', async () => {
    const suite = await loadSuite(path.join(fixtures, 'minimal/suite.yaml'));
    expect(suite.defaults).toEqual({
      n: 1,
      concurrency: os.availableParallelism(),
      timeouts: {},
      keep: 'never',
    });
  });
});

describe('loadSuite with a bad suite', () => {
  it('reports every problem at once, each with file:line:col', async () => {
    const error = await loadError(path.join(fixtures, 'bad/suite.yaml'), { displayPath: 'bad/suite.yaml' });
    expect(error.problems.length).toBeGreaterThanOrEqual(6);
    for (const problem of error.problems) expect(problem).toMatch(/^bad\/suite\.yaml:\d+:\d+ /);
    expect(error.message).toContain('bad/suite.yaml');
  });

  it('points at each offending line and column', async () => {
    const error = await loadError(path.join(fixtures, 'bad/suite.yaml'), { displayPath: 'bad/suite.yaml' });
    const at = (prefix: string): string | undefined => error.problems.find((p) => p.startsWith(prefix));
    expect(at('bad/suite.yaml:3:6 defaults.n:')).toMatch(/at least 1, got 0/);
    expect(at('bad/suite.yaml:4:9 defaults.keep:')).toMatch(
      /"on-failure", "always" or "never", got "sometimes"/,
    );
    expect(at('bad/suite.yaml:5:3 defaults.parallelism:')).toMatch(/unknown key/);
    expect(at('bad/suite.yaml:8:14 tasks[0].catalog:')).toMatch(
      /catalog not found: .*bad\/missing\/catalog\.yaml/,
    );
    expect(at('bad/suite.yaml:12:13 tasks[1].ticket:')).toBeDefined();
    expect(at('bad/suite.yaml:13:5 tasks[1].cassete:')).toMatch(/did you mean "cassette"/);
  });

  it('reports a duplicate task id at the second occurrence, naming the first', async () => {
    const error = await loadError(path.join(fixtures, 'bad/suite.yaml'), { displayPath: 'bad/suite.yaml' });
    expect(error.problems).toContain(
      'bad/suite.yaml:14:9 tasks[2].id: duplicate task id "one" (first used at line 7:9)',
    );
  });

  it('refuses a file that does not exist with a ConfigError', async () => {
    await expect(loadSuite(path.join(fixtures, 'nope.yaml'))).rejects.toBeInstanceOf(ConfigError);
  });

  describe('from text', () => {
    let dir: string | undefined;
    afterEach(async () => {
      if (dir) await rm(dir, { recursive: true, force: true });
      dir = undefined;
    });

    async function suiteIn(text: string): Promise<string> {
      dir = await mkdtemp(path.join(os.tmpdir(), 'suite-'));
      await writeFile(path.join(dir, 'catalog.yaml'), 'service: x\n');
      const file = path.join(dir, 'suite.yaml');
      await writeFile(file, text);
      return file;
    }

    it('refuses a missing repo and a missing cassette in a list', async () => {
      const file = await suiteIn(
        [
          'name: s',
          'tasks:',
          '  - id: a',
          '    catalog: catalog.yaml',
          '    ticket: t',
          '    repo: nowhere',
          '    cassette: [catalog.yaml, gone.json]',
          '',
        ].join('\n'),
      );
      const error = await loadError(file, { displayPath: 'suite.yaml' });
      expect(error.problems).toEqual([
        expect.stringMatching(/^suite\.yaml:6:11 tasks\[0\]\.repo: repo not found/),
        expect.stringMatching(/^suite\.yaml:7:30 tasks\[0\]\.cassette\[1\]: cassette not found/),
      ]);
    });

    it('refuses an empty task list and a task id with a slash', async () => {
      const empty = await suiteIn('name: s\ntasks: []\n');
      expect((await loadError(empty, { displayPath: 'suite.yaml' })).problems).toEqual([
        'suite.yaml:2:8 tasks: expected a non-empty list, got an empty list',
      ]);
      await rm(dir as string, { recursive: true, force: true });
      const slash = await suiteIn(
        'name: s\ntasks:\n  - id: ../x\n    catalog: catalog.yaml\n    ticket: t\n',
      );
      expect((await loadError(slash, { displayPath: 'suite.yaml' })).problems).toEqual([
        expect.stringMatching(/^suite\.yaml:3:9 tasks\[0\]\.id: expected an id of letters/),
      ]);
    });

    it('keeps a multi-line inline ticket as text', () => {
      const suite = parseSuite(
        path.join(basic, 'inline.yaml'),
        'name: s\ntasks:\n  - id: a\n    catalog: catalogs/calc.yaml\n    ticket: |\n      Line one.\n      Line two.\n',
      );
      expect(suite.tasks[0]?.ticket).toBe('Line one.\nLine two.\n');
    });
  });
});

describe('trial specs', () => {
  it('cycles a cassette list over trial indexes', async () => {
    const suite = await loadSuite(path.join(basic, 'suite.yaml'));
    const sub = suite.tasks[1];
    if (!sub) throw new Error('fixture changed');
    expect([0, 1, 2, 3].map((i) => path.basename(cassetteFor(sub, i) ?? ''))).toEqual([
      'fix-sub-0.json',
      'fix-sub-1.json',
      'fix-sub-0.json',
      'fix-sub-1.json',
    ]);
    expect(cassetteFor(suite.tasks[2] as (typeof suite.tasks)[number], 0)).toBeUndefined();
  });

  it('lists tasks x n trials, trial-major, carrying provider, model and mustNotTouch', async () => {
    const suite = await loadSuite(path.join(basic, 'suite.yaml'));
    const specs = trialSpecs(suite, 2);
    expect(specs.map((s) => `${s.taskId}#${s.trial}`)).toEqual([
      'fix-add#0',
      'fix-sub#0',
      'PROJ-7#0',
      'fix-add#1',
      'fix-sub#1',
      'PROJ-7#1',
    ]);
    expect(specs[4]).toMatchObject({
      provider: 'replay',
      model: 'recorded-model',
      cassette: path.join(basic, 'cassettes/fix-sub-1.json'),
      mustNotTouch: ['test/**'],
      repo: path.join(basic, 'repos/calc'),
    });
    expect(specs[2]).not.toHaveProperty('cassette');
  });
});
