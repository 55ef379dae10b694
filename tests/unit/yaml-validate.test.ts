import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { describeValue, formatPath, parseYamlWithSchema } from '../../src/yaml-validate.js';
import { ConfigError } from '../../src/errors.js';

const schema = z.strictObject({
  name: z.string(),
  ports: z.array(z.int().min(1).max(65535)).optional(),
  labels: z.record(z.string(), z.string()).optional(),
});

function problems(text: string, displayPath?: string): string[] {
  try {
    parseYamlWithSchema('/abs/service.yaml', text, schema, displayPath ? { displayPath } : {});
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return (error as ConfigError).problems;
  }
  throw new Error('expected a ConfigError');
}

describe('parseYamlWithSchema', () => {
  it('returns the parsed value when it validates', () => {
    expect(parseYamlWithSchema('f.yaml', 'name: api\nports: [80]\n', schema)).toEqual({
      name: 'api',
      ports: [80],
    });
  });

  it('shows the display path instead of the file path', () => {
    expect(problems('name: 1\n', 'catalog/service.yaml')).toEqual([
      'catalog/service.yaml:1:7 name: expected a string, got 1',
    ]);
  });

  it('locates list items and explains numeric ranges in plain words', () => {
    expect(problems('name: api\nports:\n  - 80\n  - 70000\n')).toEqual([
      '/abs/service.yaml:4:5 ports[1]: expected an integer of at most 65535, got 70000',
    ]);
  });

  it('quotes keys that are not plain identifiers in the YAML path', () => {
    expect(problems('name: api\nlabels:\n  "app.kubernetes.io/name": 3\n')).toEqual([
      '/abs/service.yaml:3:29 labels["app.kubernetes.io/name"]: expected a string, got 3',
    ]);
  });

  it('reports a document that is not a mapping at 1:1', () => {
    expect(problems('- a\n- b\n')).toEqual([
      '/abs/service.yaml:1:1 expected a mapping (key: value), got a list of 2',
    ]);
  });

  it('reports an empty document as missing fields, not as a crash', () => {
    expect(problems('')).toEqual([
      '/abs/service.yaml:1:1 expected a mapping (key: value), got an empty value (null)',
    ]);
  });

  it('reports duplicate keys as YAML errors with their position', () => {
    expect(problems('name: a\nname: b\n')).toEqual([
      '/abs/service.yaml:2:1 YAML syntax error: Map keys must be unique',
    ]);
  });

  it('refuses an alias bomb instead of expanding it', () => {
    const lines = ['a: &a [x, x, x, x, x, x, x, x, x, x]'];
    for (let i = 1; i < 9; i++) {
      const prev = String.fromCharCode(96 + i);
      const name = String.fromCharCode(97 + i);
      lines.push(`${name}: &${name} [${Array(10).fill(`*${prev}`).join(', ')}]`);
    }
    const found = problems(`${lines.join('\n')}\nname: x\n`);
    expect(found).toHaveLength(1);
    expect(found[0]).toMatch(/^\/abs\/service\.yaml:1:1 cannot read YAML: .*alias/i);
  });

  it('formats paths and found values', () => {
    expect(formatPath(['agent', 'testCommand', 1, 'name'])).toBe('agent.testCommand[1].name');
    expect(describeValue('three')).toBe('"three"');
    expect(describeValue({ a: 1 })).toBe('a mapping');
    expect(describeValue('x'.repeat(100))).toBe(JSON.stringify(`${'x'.repeat(57)}...`));
  });
});
