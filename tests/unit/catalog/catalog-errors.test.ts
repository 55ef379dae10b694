import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { loadCatalog } from '../../../src/catalog/load.js';
import { ConfigError } from '../../../src/errors.js';

let dir: string;

beforeEach(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'catalog-errors-'));
  await mkdir(path.join(dir, 'repo'));
});

afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** Loads `text` as `catalog.yaml` beside an existing `repo/` folder and returns the ConfigError. */
async function problemsOf(text: string): Promise<ConfigError> {
  await writeFile(path.join(dir, 'catalog.yaml'), text);
  const error = await loadCatalog('catalog.yaml', { cwd: dir }).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(ConfigError);
  return error as ConfigError;
}

// Line numbers in the expectations below count from this template's first line.
const catalog = (agent: string, extra = '') => `name: shipping-service
owner: team-checkout
repo: repo
rules:
  freeShippingThreshold:
    value: 50
    unit: EUR
agent:
${agent}
${extra}`;

const editable = '  editableFiles:\n    - src/**/*.js\n  testCommand: npm test';

describe('catalog validation errors name file:line:col, the YAML path, what was expected and what was found', () => {
  it('reports a missing required field at its parent mapping', async () => {
    const error = await problemsOf(catalog(editable).replace('owner: team-checkout\n', ''));
    expect(error.problems).toEqual([
      'catalog.yaml:1:1 owner: missing required field, expected the owning team or person',
    ]);
  });

  it('reports a value of the wrong type with the value found, strings JSON-quoted', async () => {
    const error = await problemsOf(catalog(`${editable}\n  maxAttempts: three`));
    expect(error.problems).toEqual([
      'catalog.yaml:12:16 agent.maxAttempts: expected an integer from 1 to 10, got "three"',
    ]);
  });

  it('reports an unknown key at the key itself and suggests the likely intended key', async () => {
    const error = await problemsOf(catalog('  editableFile:\n    - src/**/*.js\n  testCommand: npm test'));
    expect(error.problems).toContain(
      'catalog.yaml:9:3 agent.editableFile: unknown key (did you mean "editableFiles"?); known keys here: editableFiles, testCommand, maxAttempts, maxTurns, parallelAttempts, tokenBudget, ignoreChanges, heldOutTests, review, docs, skills, costLimit, prices, delegate, testReport, reward, verifierFiles, steps, kind, command, mcpServers',
    );
    // The typo also means the real key is missing: both are reported in the same run.
    expect(error.problems).toContain(
      'catalog.yaml:9:3 agent.editableFiles: missing required field, expected a list of glob patterns',
    );
  });

  it('refuses an empty editableFiles list', async () => {
    const error = await problemsOf(catalog('  editableFiles: []\n  testCommand: npm test'));
    expect(error.problems).toEqual([
      'catalog.yaml:9:18 agent.editableFiles: expected at least one glob pattern (an empty list would let the agent change nothing), got an empty list',
    ]);
  });

  it('refuses maxAttempts 0 and 11 with the allowed range', async () => {
    const zero = await problemsOf(catalog(`${editable}\n  maxAttempts: 0`));
    expect(zero.problems).toEqual([
      'catalog.yaml:12:16 agent.maxAttempts: expected an integer from 1 to 10, got 0',
    ]);
    const eleven = await problemsOf(catalog(`${editable}\n  maxAttempts: 11`));
    expect(eleven.problems).toEqual([
      'catalog.yaml:12:16 agent.maxAttempts: expected an integer from 1 to 10, got 11',
    ]);
  });

  it('refuses a build arg whose name marks a secret, without echoing its value', async () => {
    const error = await problemsOf(catalog(editable, 'sandbox:\n  buildArgs:\n    NPM_TOKEN: hunter2\n'));
    expect(error.problems).toEqual([
      'catalog.yaml:14:16 sandbox.buildArgs.NPM_TOKEN: refused: the name contains "TOKEN", which marks a secret; sandboxes never receive credentials',
    ]);
    expect(error.message).not.toContain('hunter2');
  });

  it('refuses token-shaped build arg and env values whatever their names', async () => {
    const github = 'ghp_' + 'a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8';
    const random = 'Zq8xV3pL0wN6tR2yK9mB4cJ7hF1sD5gA';
    const error = await problemsOf(
      catalog(
        editable,
        `sandbox:\n  buildArgs:\n    CACHE: ${github}\n  env:\n    SEED: ${random}\n    NODE_ENV: test\n`,
      ),
    );
    expect(error.problems).toEqual([
      'catalog.yaml:14:12 sandbox.buildArgs.CACHE: refused: the value looks like a GitHub token; sandboxes never receive credentials',
      'catalog.yaml:16:11 sandbox.env.SEED: refused: the value looks like a long random string (an API key or token); sandboxes never receive credentials',
    ]);
    expect(error.message).not.toContain(github);
    expect(error.message).not.toContain(random);
  });

  it('refuses an invalid glob, an absolute glob, a ".." glob and a negated glob in editableFiles', async () => {
    const error = await problemsOf(
      catalog(
        '  editableFiles:\n    - src/[a\n    - /etc/passwd\n    - ../other/**\n    - "!secret.js"\n  testCommand: x',
      ),
    );
    expect(error.problems).toEqual([
      'catalog.yaml:10:7 agent.editableFiles[0]: glob "src/[a" is not a valid glob: Missing closing: "]" - use "\\\\]" to match literal characters',
      'catalog.yaml:11:7 agent.editableFiles[1]: glob "/etc/passwd" must be relative to the repo root, not absolute',
      'catalog.yaml:12:7 agent.editableFiles[2]: glob "../other/**" must not contain ".." (it has to stay inside the repo)',
      'catalog.yaml:13:7 agent.editableFiles[3]: glob "!secret.js" negated patterns ("!…") are not supported: list what IS editable',
    ]);
  });

  it('reports a repo path that does not exist at the repo field', async () => {
    const error = await problemsOf(catalog(editable).replace('repo: repo', 'repo: ../no-such-repo'));
    expect(error.problems).toHaveLength(1);
    expect(error.problems[0]).toMatch(
      /^catalog\.yaml:3:7 repo: the repo folder does not exist: "\.\.\/no-such-repo" resolves to .*no-such-repo \(relative to the catalog file's folder\)$/,
    );
  });

  it('reports a repo path that is a file, not a folder', async () => {
    await writeFile(path.join(dir, 'not-a-dir'), 'x');
    const error = await problemsOf(catalog(editable).replace('repo: repo', 'repo: not-a-dir'));
    expect(error.problems[0]).toMatch(/^catalog\.yaml:3:7 repo: the repo path is not a folder/);
  });

  it('reports problems inside a layered testCommand at the layer, not as "no form matched"', async () => {
    const error = await problemsOf(
      catalog('  editableFiles: [src/**]\n  testCommand:\n    - name: unit\n      comand: npm test'),
    );
    expect(error.problems).toEqual([
      'catalog.yaml:11:7 agent.testCommand[0].command: missing required field, expected a shell command',
      'catalog.yaml:12:7 agent.testCommand[0].comand: unknown key (did you mean "command"?); known keys here: name, command',
    ]);
  });

  it('refuses a testCommand that is neither a command nor a list of layers', async () => {
    const error = await problemsOf(catalog('  editableFiles: [src/**]\n  testCommand: 42'));
    expect(error.problems).toEqual([
      'catalog.yaml:10:16 agent.testCommand: expected a shell command, or a list of layers such as [{name: unit, command: "npm test"}], got 42',
    ]);
  });

  it('refuses sandbox.dockerfile together with sandbox.image', async () => {
    const error = await problemsOf(
      catalog(editable, 'sandbox:\n  dockerfile: Dockerfile.sandbox\n  image: node:20\n'),
    );
    expect(error.problems).toEqual([
      'catalog.yaml:14:10 sandbox.image: set either sandbox.dockerfile (build) or sandbox.image (use as is), not both',
    ]);
  });

  it('refuses an unknown provider and a malformed memory size', async () => {
    const error = await problemsOf(
      catalog(editable, 'sandbox:\n  resources:\n    memory: lots\nprovider:\n  name: gpt\n'),
    );
    expect(error.problems).toEqual([
      'catalog.yaml:14:13 sandbox.resources.memory: expected a memory size such as "512m" or "1g", or a number of bytes, got "lots"',
      'catalog.yaml:16:9 provider.name: expected one of "anthropic", "openai" or "replay", got "gpt"',
    ]);
  });

  it('reports YAML syntax errors with their line:col together with schema problems', async () => {
    const error = await problemsOf(catalog(`${editable}\n  maxAttempts: 0`, 'sandbox: [unclosed\n'));
    expect(error.problems).toContain(
      'catalog.yaml:12:16 agent.maxAttempts: expected an integer from 1 to 10, got 0',
    );
    expect(error.problems).toContain(
      'catalog.yaml:14:1 YAML syntax error: Flow sequence in block collection must be sufficiently indented and end with a ]',
    );
  });

  it('reports every problem of a catalog at once, sorted by position, in the message too', async () => {
    const text = `name: shipping service
repo: ../missing
rules:
  fee: 3
agent:
  editableFiles: []
  maxAttempts: three
  testComand: npm test
`;
    const error = await problemsOf(text);
    expect(error.problems).toEqual([
      'catalog.yaml:1:1 owner: missing required field, expected the owning team or person',
      'catalog.yaml:1:7 name: expected a service name of letters, digits, ".", "_" or "-", got "shipping service"',
      expect.stringMatching(/^catalog\.yaml:2:7 repo: the repo folder does not exist/),
      'catalog.yaml:4:8 rules.fee: expected a rule such as {value: 50, unit: EUR}, got 3',
      'catalog.yaml:6:3 agent.testCommand: missing required field, expected a shell command, or a list of layers such as [{name: unit, command: "npm test"}]',
      'catalog.yaml:6:18 agent.editableFiles: expected at least one glob pattern (an empty list would let the agent change nothing), got an empty list',
      'catalog.yaml:7:16 agent.maxAttempts: expected an integer from 1 to 10, got "three"',
      expect.stringMatching(
        /^catalog\.yaml:8:3 agent\.testComand: unknown key \(did you mean "testCommand"\?\)/,
      ),
    ]);
    const [summary, ...lines] = error.message.split('\n');
    expect(summary).toBe('catalog.yaml is not valid (8 problems):');
    expect(lines.map((l) => l.trim())).toEqual(error.problems);
  });

  it('names the file when the catalog does not exist', async () => {
    const error = await loadCatalog('catalog/nope.yaml', { cwd: dir }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).message).toContain('catalog file not found: catalog/nope.yaml');
  });
});

describe('agent.steps and agent.reward (Harbor tasks)', () => {
  const reward = '\n  reward:\n    dir: .harbor-verifier';
  const steps = (names: string[]) =>
    `\n  steps:\n${names.map((n) => `    - name: ${n}\n      ticket: ${n}.md\n      testCommand: bash /tests/test.sh`).join('\n')}`;

  it('steps need a reward: each step is decided by the reward its verifier leaves', async () => {
    const error = await problemsOf(catalog(`${editable}${steps(['one'])}`));
    expect(error.problems.join('\n')).toMatch(/agent\.steps: steps need agent\.reward/);
  });

  it('refuses a rule or strategy that is not one, and a step name used twice', async () => {
    const error = await problemsOf(
      catalog(`${editable}${reward}\n    unchanged: skip\n    combine: best${steps(['one'])}`),
    );
    const all = error.problems.join('\n');
    expect(all).toMatch(/agent\.reward\.unchanged: expected "verify" or "scores-zero"/);
    expect(all).toMatch(/agent\.reward\.combine: expected "mean" or "final"/);
    const twice = await problemsOf(catalog(`${editable}${reward}${steps(['one', 'one'])}`));
    expect(twice.problems.join('\n')).toMatch(/agent\.steps\[1\]\.name: step name "one" is used twice/);
  });

  it("defaults to Harbor's rules: the verifier runs on an unchanged workspace, the steps' mean", async () => {
    await writeFile(path.join(dir, 'catalog.yaml'), catalog(`${editable}${reward}`));
    const loaded = await loadCatalog('catalog.yaml', { cwd: dir });
    expect(loaded.catalog.agent.reward).toEqual({
      dir: '.harbor-verifier',
      unchanged: 'verify',
      combine: 'mean',
    });
  });
});
