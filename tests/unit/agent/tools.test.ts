import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { resolveWorkspacePath, shellQuote } from '../../../src/agent/tools/workspace-path.js';
import { createDefaultToolRegistry, type ToolRegistry } from '../../../src/agent/tools/tool-registry.js';
import { searchCommand } from '../../../src/agent/tools/search.js';
import type { ExecOptions } from '../../../src/sandbox/types.js';
import { MemorySandbox, type ExecHandler } from '../../fakes/memory-sandbox.js';

function registry(overrides: Parameters<typeof createDefaultToolRegistry>[0] = {}): ToolRegistry {
  return createDefaultToolRegistry({
    isEditable: (path) => path.startsWith('src/'),
    editableGlobs: ['src/**', 'lib/*.ts'],
    ...overrides,
  });
}

async function run(sandbox: MemorySandbox, name: string, input: unknown, tools = registry()) {
  return tools.run(name, input, { sandbox });
}

describe('workspace paths', () => {
  it.each([
    ['src/a.ts', 'src/a.ts'],
    ['./src/a.ts', 'src/a.ts'],
    ['/workspace/src/a.ts', 'src/a.ts'],
    ['/workspace', '.'],
    ['src/../lib/b.ts', 'lib/b.ts'],
    ['src/', 'src'],
  ])('%s -> %s', (raw, expected) => expect(resolveWorkspacePath(raw)).toBe(expected));

  it.each(['/etc/passwd', '/workspace/../etc/passwd', '../outside', 'src/../../x', '/workspacefoo/a'])(
    'refuses %s',
    (raw) => expect(() => resolveWorkspacePath(raw)).toThrow(/outside \/workspace|leads outside/),
  );
});

describe('shellQuote', () => {
  it.each(["it's", '$(touch /tmp/pwned)', '`id`', 'a"b', "'", 'semi; colon && amp', 'new\nline'])(
    'makes sh see %j as one literal argument',
    (value) => {
      const result = spawnSync('sh', ['-c', `printf %s ${shellQuote(value)}`], { encoding: 'utf8' });
      expect(result.stdout).toBe(value);
    },
  );
});

describe('read_file', () => {
  it('returns the content', async () => {
    const result = await run(new MemorySandbox({ 'src/a.ts': 'export const a = 1;\n' }), 'read_file', {
      path: 'src/a.ts',
    });
    expect(result).toEqual({ content: 'export const a = 1;\n', isError: false });
  });

  it('explains a missing file', async () => {
    const result = await run(new MemorySandbox(), 'read_file', { path: 'nope.ts' });
    expect(result.isError).toBe(true);
    expect(result.content).toMatch(/nope.ts: no such file\nHint: check the path with list_files/);
  });

  it('cuts the middle of a long file and says so', async () => {
    const long = `HEAD\n${'line\n'.repeat(20_000)}TAIL\n`;
    const result = await run(new MemorySandbox({ 'big.txt': long }), 'read_file', { path: 'big.txt' });
    expect(result.content.startsWith('HEAD')).toBe(true);
    expect(result.content.endsWith('TAIL\n')).toBe(true);
    expect(result.content).toMatch(/\[\.\.\. \d+ of 100010 characters of big.txt cut here \.\.\.\]/);
    expect(result.content.length).toBeLessThan(31_000);
  });

  it('does not dump binary files', async () => {
    const result = await run(
      new MemorySandbox({ 'logo.png': Buffer.from([0x89, 0x50, 0x00, 0x01]) }),
      'read_file',
      {
        path: 'logo.png',
      },
    );
    expect(result.content).toBe('logo.png is a binary file (4 bytes); its content is not shown');
  });
});

describe('write_file', () => {
  it('writes an editable path, also given as /workspace/...', async () => {
    const sandbox = new MemorySandbox();
    const result = await run(sandbox, 'write_file', { path: '/workspace/src/new.ts', content: 'x' });
    expect(result).toEqual({ content: 'wrote 1 bytes to src/new.ts', isError: false });
    expect(sandbox.text('src/new.ts')).toBe('x');
  });

  it('refuses a path that is not editable, listing the editable globs', async () => {
    const sandbox = new MemorySandbox();
    const result = await run(sandbox, 'write_file', { path: 'package.json', content: '{}' });
    expect(result.isError).toBe(true);
    expect(result.content).toMatch(/package.json is not editable: .*src\/\*\*, lib\/\*\.ts/);
    expect(sandbox.filePaths()).toEqual([]);
  });

  it('refuses paths outside the workspace', async () => {
    const sandbox = new MemorySandbox();
    for (const path of ['/etc/profile', 'src/../../etc/profile']) {
      const result = await run(
        sandbox,
        'write_file',
        { path, content: 'x' },
        registry({ isEditable: () => true }),
      );
      expect(result.isError).toBe(true);
      expect(result.content).toMatch(/outside \/workspace/);
    }
    expect(sandbox.filePaths()).toEqual([]);
  });
});

describe("write_file and edit_file keep a file's mode", () => {
  const modeOf = (sandbox: MemorySandbox, path: string) => {
    const node = sandbox.nodes.get(path);
    return node?.type === 'file' ? node.mode : undefined;
  };

  it('an executable file stays 0755 and a new file is 0644', async () => {
    const sandbox = new MemorySandbox({
      'src/cli.js': { type: 'file', content: '#!/usr/bin/env node\nrun(1);\n', mode: 0o755 },
      'src/tool.js': { type: 'file', content: 'old\n', mode: 0o755 },
    });
    await run(sandbox, 'edit_file', { path: 'src/cli.js', search: 'run(1);', replacement: 'run(2);' });
    await run(sandbox, 'write_file', { path: 'src/tool.js', content: 'new\n' });
    await run(sandbox, 'write_file', { path: 'src/fresh.js', content: 'fresh\n' });
    expect(sandbox.text('src/cli.js')).toBe('#!/usr/bin/env node\nrun(2);\n');
    expect(modeOf(sandbox, 'src/cli.js')).toBe(0o755);
    expect(modeOf(sandbox, 'src/tool.js')).toBe(0o755);
    expect(modeOf(sandbox, 'src/fresh.js')).toBe(0o644);
  });

  it('a setuid bit the agent set is not kept by a tool write', async () => {
    const sandbox = new MemorySandbox({ 'src/s.js': { type: 'file', content: 'x\n', mode: 0o4755 } });
    await run(sandbox, 'write_file', { path: 'src/s.js', content: 'y\n' });
    expect(modeOf(sandbox, 'src/s.js')).toBe(0o755);
  });
});

describe('edit_file', () => {
  const file = [
    'function price(total) {', // 1
    '  const rate = 0.1;', // 2
    '  return total * rate;', // 3
    '  log(total);', // 4
    '}', // 5
    '', // 6
    'function other() {', // 7
    '  const x = 1;', // 8
    '  log(total);', // 9
    '}', // 10
    '', // 11
    'export const MAX_DISCOUNT = 0.25;', // 12
    '',
  ].join('\n');

  it('replaces a unique match', async () => {
    const sandbox = new MemorySandbox({ 'src/p.ts': file });
    const result = await run(sandbox, 'edit_file', {
      path: 'src/p.ts',
      search: 'const rate = 0.1;',
      replacement: 'const rate = 0.2;',
    });
    expect(result).toEqual({ content: 'edited src/p.ts at line 2', isError: false });
    expect(sandbox.text('src/p.ts')).toContain('const rate = 0.2;');
  });

  it('keeps $ patterns in the replacement literal', async () => {
    const sandbox = new MemorySandbox({ 'src/p.ts': 'A\n' });
    await run(sandbox, 'edit_file', { path: 'src/p.ts', search: 'A', replacement: "$& and $1 and $'" });
    expect(sandbox.text('src/p.ts')).toBe("$& and $1 and $'\n");
  });

  it('says "found 0 times" and shows the closest line', async () => {
    const result = await run(new MemorySandbox({ 'src/p.ts': file }), 'edit_file', {
      path: 'src/p.ts',
      search: 'export const MAX_DISCOUNT = 0.3;',
      replacement: 'x',
    });
    expect(result.isError).toBe(true);
    expect(result.content).toMatch(
      /found 0 times in src\/p.ts; closest line 12: export const MAX_DISCOUNT = 0.25;/,
    );
  });

  it('points at the search line that broke a multi-line match', async () => {
    const result = await run(new MemorySandbox({ 'src/p.ts': file }), 'edit_file', {
      path: 'src/p.ts',
      search: 'function price(total) {\n  const rate = 0.15;',
      replacement: 'x',
    });
    expect(result.content).toMatch(/closest line 2: {3}const rate = 0.1;/);
  });

  it('says "found 2 times, at lines 4 and 9; add context"', async () => {
    const sandbox = new MemorySandbox({ 'src/p.ts': file });
    const result = await run(sandbox, 'edit_file', {
      path: 'src/p.ts',
      search: '  log(total);',
      replacement: '',
    });
    expect(result.isError).toBe(true);
    expect(result.content).toMatch(/found 2 times in src\/p.ts, at lines 4 and 9; add context/);
    expect(sandbox.text('src/p.ts')).toBe(file);
  });

  it('refuses a non-editable file before reading it', async () => {
    const result = await run(new MemorySandbox({ 'test/p.test.ts': 'x' }), 'edit_file', {
      path: 'test/p.test.ts',
      search: 'x',
      replacement: 'y',
    });
    expect(result.content).toMatch(/not editable/);
  });

  it('rejects an empty search string as invalid input', async () => {
    const result = await run(new MemorySandbox({ 'src/p.ts': file }), 'edit_file', {
      path: 'src/p.ts',
      search: '',
      replacement: 'y',
    });
    expect(result.content).toMatch(/invalid input for edit_file: search:/);
  });
});

describe('list_files', () => {
  const sandbox = new MemorySandbox({
    'src/a.ts': '',
    'src/b.test.ts': '',
    'src/deep/c.ts': '',
    'README.md': '',
  });

  it('lists below a path', async () => {
    expect((await run(sandbox, 'list_files', { path: 'src' })).content).toBe(
      'src/a.ts\nsrc/b.test.ts\nsrc/deep/\nsrc/deep/c.ts',
    );
  });

  it('filters by a file-name glob or a path glob', async () => {
    expect((await run(sandbox, 'list_files', { pattern: '*.test.ts' })).content).toBe('src/b.test.ts');
    expect((await run(sandbox, 'list_files', { pattern: 'src/*/*.ts' })).content).toBe('src/deep/c.ts');
  });

  it('caps long listings and says how many were left out', async () => {
    const files = Object.fromEntries(
      Array.from({ length: 30 }, (_, i) => [`f${String(i).padStart(2, '0')}.txt`, '']),
    );
    const result = await run(
      new MemorySandbox(files),
      'list_files',
      {},
      registry({ limits: { maxListEntries: 10 } }),
    );
    expect(result.content.split('\n')).toHaveLength(11);
    expect(result.content).toMatch(/\[20 more entries not shown/);
  });
});

describe('search', () => {
  it('quotes the pattern and path so the shell never interprets them', () => {
    expect(searchCommand("it's $(rm -rf /)", 'src')).toBe(
      `grep -rnIE --exclude-dir=.git --exclude-dir=node_modules -e 'it'\\''s $(rm -rf /)' -- src`,
    );
  });

  it('runs grep in the workspace and tidies its output', async () => {
    let seen: ExecOptions | undefined;
    const handler: ExecHandler = (_command, options) => {
      seen = options;
      return { exitCode: 0, stdout: './src/a.ts:3:const total = 1;\n./src/b.ts:9:total++;\n' };
    };
    const sandbox = new MemorySandbox({}, handler);
    const result = await run(sandbox, 'search', { pattern: 'total' });
    expect(sandbox.commands[0]).toBe(searchCommand('total', '.'));
    expect(seen?.cwd).toBe('/workspace');
    expect(result.content).toBe('src/a.ts:3:const total = 1;\nsrc/b.ts:9:total++;');
  });

  it('reports no matches (grep exit 1) as a normal result and a bad pattern as an error', async () => {
    const none = await run(new MemorySandbox({}, () => ({ exitCode: 1 })), 'search', { pattern: 'zzz' });
    expect(none).toMatchObject({ content: 'no matches for zzz in .', isError: false });
    const bad = await run(
      new MemorySandbox({}, () => ({ exitCode: 2, stderr: 'grep: Unmatched ( or \\(\n' })),
      'search',
      {
        pattern: '(',
      },
    );
    expect(bad.isError).toBe(true);
    expect(bad.content).toMatch(/grep failed \(exit code 2\): grep: Unmatched/);
  });

  it('caps the number of matching lines', async () => {
    const stdout = Array.from({ length: 50 }, (_, i) => `f.ts:${i}:hit`).join('\n');
    const result = await run(
      new MemorySandbox({}, () => ({ stdout })),
      'search',
      { pattern: 'hit' },
      registry({ limits: { maxSearchLines: 5 } }),
    );
    expect(result.content.split('\n')).toHaveLength(6);
    expect(result.content).toMatch(/45 more matching lines not shown/);
  });
});

describe('run_command', () => {
  it('runs the command in the workspace with limits and no extra environment', async () => {
    let seen: ExecOptions | undefined;
    const sandbox = new MemorySandbox({}, (_command, options) => {
      seen = options;
      return { exitCode: 1, stdout: 'FAIL src/a.test.ts\n', stderr: 'warning\n' };
    });
    const result = await run(sandbox, 'run_command', { command: 'npm test', timeoutSec: 30 });
    expect(sandbox.commands).toEqual(['npm test']);
    expect(seen).toMatchObject({ cwd: '/workspace', timeoutMs: 30_000, maxOutputBytes: 256 * 1024 });
    expect(seen?.env).toBeUndefined();
    expect(result).toEqual({
      content:
        'exit code: 1\ntimed out: no\ntruncated: no\nstdout:\nFAIL src/a.test.ts\n\nstderr:\nwarning\n',
      isError: false,
      exitCode: 1,
    });
  });

  it('says when the command timed out or its output was truncated', async () => {
    const sandbox = new MemorySandbox({}, () => ({
      exitCode: 124,
      timedOut: true,
      stdout: 'y\n'.repeat(200_000),
    }));
    const result = await run(sandbox, 'run_command', { command: 'sleep 999' });
    expect(result.isError).toBe(true);
    expect(result.content).toMatch(/timed out: yes, killed after 120s/);
    expect(result.content).toMatch(/truncated: yes/);
  });

  it('lowers an excessive timeout to the maximum and tells the model', async () => {
    let seen: ExecOptions | undefined;
    const sandbox = new MemorySandbox({}, (_command, options) => {
      seen = options;
      return {};
    });
    const result = await run(sandbox, 'run_command', { command: 'make', timeoutSec: 99_999 });
    expect(seen?.timeoutMs).toBe(900_000);
    expect(result.content).toMatch(/lowered to the 900s maximum/);
  });
});
