import { describe, expect, it } from 'vitest';
import { createAllowlist, findCollisions, pathProblem } from '../../../src/changes/allowlist.js';

const allowlist = createAllowlist({
  editable: ['src/**/*.ts', 'test/**', 'README.md'],
  neverEditable: ['catalog/shipping.yaml'],
});

describe('allowlist.check', () => {
  const table: [string, boolean, RegExp?][] = [
    ['src/pricing.ts', true],
    ['src/deep/nested/rate.ts', true],
    ['src/.hidden/x.ts', true],
    ['test/pricing.test.ts', true],
    ['README.md', true],
    ['src/pricing.js', false, /not in the editable files/],
    ['package.json', false, /not in the editable files/],
    ['readme.md', false, /not in the editable files/],
    ['src/../package.json', false, /contains "\.\."/],
    ['../outside.ts', false, /contains "\.\."/],
    ['src/..', false, /contains "\.\."/],
    ['/etc/passwd', false, /absolute path/],
    ['/workspace/src/pricing.ts', false, /absolute path/],
    ['C:/src/pricing.ts', false, /absolute path/],
    ['src\\pricing.ts', false, /backslash/],
    ['src/pri\0cing.ts', false, /control character/],
    ['src/pricing\n.ts', false, /control character/],
    ['src/pricing\u001b[0m.ts', false, /control character/],
    ['src/\u202Egnp.ts', false, /text-direction/],
    ['src//pricing.ts', false, /not a normalised path/],
    ['./src/pricing.ts', false, /not a normalised path/],
    ['src/pricing.ts/', false, /not a normalised path/],
    ['', false, /empty path/],
    ['.git/config', false, /inside \.git/],
    ['.git/hooks/pre-commit', false, /inside \.git/],
    ['.GIT/config', false, /inside \.git/],
    ['src/vendor/.git/config', false, /inside \.git/],
    ['test/.git', false, /inside \.git/],
    ['catalog/shipping.yaml', false, /never editable/],
    ['CATALOG/Shipping.yaml', false, /never editable/],
  ];

  it.each(table)('%j allowed=%s', (path, allowed, reason) => {
    const verdict = allowlist.check(path);
    expect(verdict.allowed).toBe(allowed);
    if (reason) expect(verdict.reason).toMatch(reason);
    else expect(verdict.reason).toBeUndefined();
  });

  it('never allows .git even when an editable glob covers everything', () => {
    const everything = createAllowlist({ editable: ['**'] });
    expect(everything.check('src/a.ts').allowed).toBe(true);
    expect(everything.check('.git/HEAD').allowed).toBe(false);
  });

  it('allows nothing when there are no editable globs', () => {
    expect(createAllowlist({ editable: [] }).check('src/a.ts')).toEqual({
      allowed: false,
      kind: 'not-editable',
      reason: 'is not in the editable files',
    });
  });
});

describe('allowlist.classify', () => {
  it('refuses every path of a case-fold collision, even the ones that match a glob', () => {
    const result = allowlist.classify(['src/Rate.ts', 'src/rate.ts', 'src/other.ts']);
    expect(result.get('src/Rate.ts')).toEqual({
      allowed: false,
      kind: 'collision',
      reason: expect.stringMatching(
        /^collides with "src\/rate\.ts" when letter case or Unicode normalisation is ignored/,
      ),
    });
    expect(result.get('src/rate.ts')?.allowed).toBe(false);
    expect(result.get('src/other.ts')).toEqual({ allowed: true });
  });

  it('refuses both spellings of a Unicode NFC/NFD collision', () => {
    const composed = 'src/caf\u00e9.ts';
    const decomposed = 'src/cafe\u0301.ts';
    expect(composed).not.toBe(decomposed);
    const result = allowlist.classify([composed, decomposed]);
    expect(result.get(composed)?.allowed).toBe(false);
    expect(result.get(decomposed)?.allowed).toBe(false);
  });

  it('classifies each path on its own when there is no collision', () => {
    const result = allowlist.classify(['src/a.ts', 'package.json', '../x']);
    expect([...result].map(([p, v]) => [p, v.allowed])).toEqual([
      ['src/a.ts', true],
      ['package.json', false],
      ['../x', false],
    ]);
  });
});

describe('path helpers', () => {
  it('finds no collision for distinct paths or a repeated identical path', () => {
    expect(findCollisions(['a/b.ts', 'a/c.ts', 'a/b.ts']).size).toBe(0);
  });

  it('accepts plain relative posix paths', () => {
    expect(pathProblem('src/a b/ü.ts')).toBeUndefined();
  });
});

describe('protected paths', () => {
  const everything = createAllowlist({
    editable: ['**', 'Dockerfile.sandbox'],
    protected: ['build/sandbox.Dockerfile'],
  });

  it.each([
    '.sandbox-harness/runs/x/run.json',
    '.sandbox-harness',
    '.dockerignore',
    '.github/workflows/ci.yml',
    '.GitHub/Workflows/ci.yml',
    '.husky/pre-commit',
    '.githooks/pre-push',
    'build/sandbox.Dockerfile',
  ])('a broad glob never makes %j editable', (path) => {
    expect(everything.check(path)).toMatchObject({ allowed: false, kind: 'protected' });
  });

  it('an editable entry naming the path exactly does', () => {
    expect(everything.check('Dockerfile.sandbox')).toEqual({ allowed: true });
    expect(
      createAllowlist({ editable: ['.github/workflows/ci.yml'] }).check('.github/workflows/ci.yml'),
    ).toEqual({
      allowed: true,
    });
    expect(
      createAllowlist({ editable: ['.github/workflows/*.yml'] }).check('.github/workflows/ci.yml'),
    ).toMatchObject({
      allowed: false,
      kind: 'protected',
    });
  });

  it('ordinary files under a broad glob stay editable', () => {
    expect(everything.check('src/a.ts')).toEqual({ allowed: true });
    expect(everything.check('docs/.github.md')).toEqual({ allowed: true });
  });
});
