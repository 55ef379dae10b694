/**
 * Names are names: the reference grammar of image names (distribution/reference) and the
 * grammars of engine, context, runtime and container names, with the names real registries
 * use and the ones an attacker would try (path segments, escapes, queries, flags, floods).
 */
import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/errors.js';
import {
  contextNameProblem,
  engineNameProblem,
  imageRefProblem,
  objectNameProblem,
  parseEngineName,
  parseImageRef,
  parseObjectName,
  parseRuntimeName,
  runtimeNameProblem,
} from '../../src/object-names.js';

const DIGEST = `sha256:${'0123456789abcdef'.repeat(4)}`;

describe('image references', () => {
  it.each([
    ['node:20-bookworm', { name: 'node', path: ['node'], tag: '20-bookworm' }],
    ['sandbox-harness/base-python:3', { name: 'sandbox-harness/base-python', tag: '3' }],
    ['sandbox-harness/repo-my-py-service:2f083d3e45d98419', { tag: '2f083d3e45d98419' }],
    ['ubuntu', { name: 'ubuntu', path: ['ubuntu'] }],
    ['library/python:3.12-slim-bookworm', { path: ['library', 'python'] }],
    ['ghcr.io/org/team/app:v1.2.3', { domain: 'ghcr.io', path: ['org', 'team', 'app'], tag: 'v1.2.3' }],
    ['localhost:5000/app', { domain: 'localhost:5000', path: ['app'] }],
    ['localhost/app', { domain: 'localhost', path: ['app'] }],
    ['registry.example.com:443/a/b__c/d-e/f.g', { domain: 'registry.example.com:443' }],
    ['[::1]:5000/app:1', { domain: '[::1]:5000', path: ['app'], tag: '1' }],
    [`app@${DIGEST}`, { name: 'app', digest: DIGEST }],
    [`quay.io/a/b:t@${DIGEST}`, { tag: 't', digest: DIGEST }],
    [DIGEST, { name: 'sha256', tag: '0123456789abcdef'.repeat(4) }],
    ['0123456789ab', { name: '0123456789ab' }],
    ['a--b---c:TAG_with.dots-1', { path: ['a--b---c'], tag: 'TAG_with.dots-1' }],
  ])('%s is a reference', (text, expected) => {
    expect(imageRefProblem(text)).toBeUndefined();
    expect(parseImageRef(text)).toMatchObject({ text, ...expected });
  });

  it.each([
    ['../../evil'],
    ['../../../../containers/json'],
    ['a/../b'],
    ['a/./b'],
    ['./a'],
    ['..'],
    ['.'],
    [''],
    ['/abs'],
    ['a//b'],
    ['a/'],
    ['a%2f..%2fb'],
    ['%2e%2e/x'],
    ['a?b=c'],
    ['a#frag'],
    ['a b'],
    ['a\nb'],
    ['a\u0000b'],
    ['-rf'],
    ['--privileged'],
    ['Upper/Case'],
    ['app:'],
    ['app:-tag'],
    ['app:.tag'],
    [`app:${'t'.repeat(129)}`],
    ['app@sha256:short'],
    ['app@'],
    ['a..b'],
    ['a_-b'],
    ['a/b\\c'],
    ['ünicode'],
    ['http://registry/app'],
    [`${'a'.repeat(256)}:1`],
  ])('%j is refused', (text) => {
    expect(imageRefProblem(text)).toMatch(/^expected an image reference/);
    expect(() => parseImageRef(text, 'sandbox.image')).toThrow(ConfigError);
    expect(() => parseImageRef(text, 'sandbox.image')).toThrow(
      /^sandbox\.image: expected an image reference/,
    );
  });

  it('a refusal quotes what it was given, cut short and escaped, and says what a reference looks like', () => {
    const problem = imageRefProblem(`../${'x'.repeat(1000)}\n`)!;
    expect(problem.length).toBeLessThan(700);
    expect(problem).toContain('"../xxx');
    expect(problem).not.toContain('\n');
    expect(problem).toContain('[domain/]lowercase path[:tag][@digest]');
  });

  it('the longest name allowed is 255 characters', () => {
    expect(imageRefProblem(`${'a'.repeat(255)}:1`)).toBeUndefined();
    expect(imageRefProblem(`${'a'.repeat(256)}:1`)).toMatch(/256 characters \(at most 255\)/);
  });
});

describe('engine, context, runtime and container names', () => {
  it.each([
    [
      engineNameProblem,
      ['local', 'gpu-1', 'node_3.eu', 'A'.repeat(63)],
      ['', '-x', '../x', 'a/b', 'a b', 'A'.repeat(64)],
    ],
    [contextNameProblem, ['default', 'build-box', 'ctx+1'], ['', '../x', 'a/b', '.hidden', 'a\nb']],
    [
      runtimeNameProblem,
      ['runc', 'runsc', 'crun', 'kata-runtime', 'io.containerd.runc.v2'],
      ['', '../runc', '-x', 'a/b', 'run c'],
    ],
    [
      objectNameProblem,
      ['5a83124bcfda', 'f'.repeat(64), 'sandbox-harness-run-1-attempt-1-abcdef', 'net.1_x'],
      ['', '../x', 'a/b', 'x?y', '-x', '.x', 'x y', 'x\u0000'],
    ],
  ] as const)('%o: accepts its names, refuses the rest', (problem, good, bad) => {
    for (const name of good) expect(problem(name), name).toBeUndefined();
    for (const name of bad) expect(problem(name), name).toMatch(/^expected /);
  });

  it('the parsers throw ConfigError naming where the name came from', () => {
    expect(() => parseEngineName('../x', 'engines.yaml:3:11')).toThrow(
      /^engines\.yaml:3:11: expected an engine name/,
    );
    expect(() => parseRuntimeName('a/b', '--runtime')).toThrow(ConfigError);
    expect(() => parseObjectName('../../images/x', 'run.json containers[0].id')).toThrow(
      /^run\.json containers\[0\]\.id: expected a container or network id or name .*, got "\.\.\/\.\.\/images\/x"$/,
    );
  });
});
