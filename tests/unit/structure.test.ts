/**
 * Rules of the code's shape that a change could break without any behaviour test noticing:
 * one folder talks to dockerode, one file decides how the process exits, only the sandbox
 * registry reaches a backend's folder, every import points down the house's layers, no
 * import cycles, no file too long to read, no two files a reader could confuse, and task
 * sources known by their registry alone.
 */
import { existsSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../helpers/cli.js';

async function sourceFiles(dir = path.join(ROOT, 'src')): Promise<string[]> {
  const out: string[] = [];
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) out.push(...(await sourceFiles(full)));
    else if (entry.name.endsWith('.ts')) out.push(full);
  }
  return out;
}

/** Source files whose code (comments left out) matches `pattern`, relative to the repo. */
async function filesMatching(pattern: RegExp): Promise<string[]> {
  const hits: string[] = [];
  for (const file of await sourceFiles()) {
    const code = (await readFile(file, 'utf8')).replace(/\/\*[\s\S]*?\*\/|^\s*\/\/.*$/gm, '');
    if (pattern.test(code)) hits.push(path.relative(ROOT, file));
  }
  return hits.sort();
}

/** Every module a source file imports (static, `export ... from`, dynamic), resolved to a path relative to the repo. */
async function importsOf(file: string): Promise<string[]> {
  const code = (await readFile(file, 'utf8')).replace(/\/\*[\s\S]*?\*\/|^\s*\/\/.*$/gm, '');
  const specifiers = [
    ...code.matchAll(/\bfrom\s+'([^']+)'/g),
    ...code.matchAll(/\bimport\s*\(\s*'([^']+)'\s*\)/g),
    ...code.matchAll(/^\s*import\s+'([^']+)'/gm),
  ].map((m) => m[1] ?? '');
  return specifiers
    .filter((s) => s.startsWith('.'))
    .map((s) =>
      path
        .relative(ROOT, path.resolve(path.dirname(file), s))
        .split(path.sep)
        .join('/'),
    );
}

/** Source files outside `folder` that import something inside it. */
async function importersOf(folder: string): Promise<string[]> {
  const hits: string[] = [];
  for (const file of await sourceFiles()) {
    const rel = path.relative(ROOT, file).split(path.sep).join('/');
    if (rel.startsWith(`${folder}/`)) continue;
    if ((await importsOf(file)).some((target) => target.startsWith(`${folder}/`))) hits.push(rel);
  }
  return hits.sort();
}

describe('the shape of the code', () => {
  it('only sandbox/backend-registry.ts imports the Docker backend (type imports and dynamic imports too)', async () => {
    expect(await importersOf('src/sandbox/docker')).toEqual(['src/sandbox/backend-registry.ts']);
  });

  it('the image context code knows no backend', async () => {
    const reaching: string[] = [];
    for (const file of await sourceFiles(path.join(ROOT, 'src', 'image-context'))) {
      if ((await importsOf(file)).some((t) => t.startsWith('src/sandbox/')))
        reaching.push(path.relative(ROOT, file));
    }
    expect(reaching).toEqual([]);
  });

  it('the seam check sees a reach into the backend (so the test above can fail)', async () => {
    const targets = await importsOf(path.join(ROOT, 'src', 'sandbox', 'backend-registry.ts'));
    expect(targets).toContain('src/sandbox/docker/docker-provider.js');
    expect(targets).toContain('src/sandbox/docker/fleet/engines-file.js');
  });

  it('only main.ts calls process.exit', async () => {
    expect(await filesMatching(/process\.exit\(/)).toEqual(['src/main.ts']);
  });
});

describe('HTML is safe by type', () => {
  const inView = (file: string) => file.startsWith('src/view/');
  const isReport = (file: string) => /^src\/evals\/report[\w-]*\.ts$/.test(file);

  it('the viewer does not take its escaper or its CSS from the eval report', async () => {
    const hits = await filesMatching(/from '[./]*evals\/report\.js'/);
    expect(hits.filter(inView)).toEqual([]);
  });

  it('no page of the viewer or the report calls the old hand-written escapers', async () => {
    const hits = await filesMatching(/\b(?:escapeHtml|escapeText|attr)\(/);
    expect(hits.filter((f) => inView(f) || isReport(f))).toEqual([]);
  });

  it('markup from a constant (trustedHtml) is made only where the page shell and its CSS live', async () => {
    expect(await filesMatching(/\btrustedHtml\(/)).toEqual([
      'src/evals/report-html.ts',
      'src/html/html.ts',
      'src/view/layout.ts',
    ]);
  });
});

describe('sizes and durations are written for people in src/format.ts only', () => {
  // A number shown with a unit is a division by a unit's factor inside a template, a
  // `.toFixed` of one, a unit's name as a string, or a unit written after an interpolation.
  // Limit arithmetic (`4 * 1024 * 1024`, `testSec * 1000`, the catalog's `1g` parser) does
  // none of these; neither does a setting echoed in its own unit (`${timeoutSec}s`) or an
  // exact byte count at a limit (`1025 bytes is over the 1024-byte cap`), where rounding
  // would hide the very difference the message is about.
  const FACTOR = String.raw`(?:1000|1e3|1_000|60_?000|1024|1e6|1e9|1_000_000)\b`;
  const handFormatting = [
    new RegExp(String.raw`\$\{[^{}]*\/\s*${FACTOR}[^{}]*\}`),
    new RegExp(String.raw`\/\s*${FACTOR}(?:\s*\*\*\s*\d)?\s*\)\s*\.toFixed\(`),
    /['"`][KMGTP]i?B['"`]/,
    /\}\s?(?:[KMGTP]i?B|ms|min)\b/,
  ];
  const formatsByHand = (code: string) => handFormatting.some((re) => re.test(code));

  it('no file but src/format.ts turns bytes or milliseconds into text by hand', async () => {
    const hits: string[] = [];
    for (const pattern of handFormatting) hits.push(...(await filesMatching(pattern)));
    expect([...new Set(hits)].filter((f) => f !== 'src/format.ts').sort()).toEqual([]);
  });

  // The formatters it replaced (so the test above can fail), then what it must leave alone:
  // limit arithmetic, settings in their own unit, exact counts at a limit.
  it.each([
    ['return `${(bytes / 1e9).toFixed(1)} GB`;', true],
    ['return `${(bytes / 1024 ** 3).toFixed(1)} GiB`;', true],
    ["const units = ['B', 'KB', 'MB', 'GB', 'TB'];", true],
    ['const took = `+${((at - start) / 1000).toFixed(1)} s`;', true],
    ['throw new Error(`did not finish within ${timeoutMs / 1000} s`);', true],
    ['say(`wait ${Math.ceil(retryAfterMs / 1000)}s`);', true],
    ['detail: `ran in ${elapsed} ms`,', true],
    ['const s = (ms / 1000).toFixed(1);', true],
    ['maxFileBytes: 4 * 1024 * 1024 * 1024,', false],
    ['timeoutMs: catalog.sandbox.timeouts.testSec * 1000,', false],
    ["const UNITS = { '': 1, k: 1024, m: 1024 ** 2, g: 1024 ** 3 };", false],
    ['const timeoutSec = Math.max(1, Math.ceil(timeoutMs / 1000));', false],
    ['new RunTimeout(`the run time limit (${runSec}s) passed`)', false],
    ['why: `${bytes} bytes changed, over the ${limit}-byte limit`,', false],
  ])('the check reads %s as hand formatting: %s', (code, expected) => {
    expect(formatsByHand(code)).toBe(expected);
  });
});

describe('plain-text tables are laid out in src/format.ts only', () => {
  // A hand-made table measures its column from its rows (`Math.max(...rows.map((r) =>
  // r.id.length))`) and pads to that; `textTable` and `alignColumns` do it once.
  const measuresColumns = /Math\.max\([^;]*\.\.\.[^;]*\.length/;

  it('no file but src/format.ts measures a column width from its rows', async () => {
    expect((await filesMatching(measuresColumns)).filter((f) => f !== 'src/format.ts')).toEqual([]);
  });

  it('the check sees the hand-padded tables it replaced, and not a length clamp', () => {
    expect(measuresColumns.test('const width = Math.max(4, ...backlog.items.map((i) => i.id.length));')).toBe(
      true,
    );
    expect(measuresColumns.test('const width = Math.max(...checks.map((c) => c.name.length));')).toBe(true);
    expect(
      measuresColumns.test('const keep = rest.subarray(Math.max(0, rest.length - this.tailLimit));'),
    ).toBe(false);
  });
});

describe('git is started on the host by src/host-git/ only', () => {
  // Host git reads no configuration of a repo or the user only because src/host-git/ builds
  // its environment and settings; git started anywhere else would obey both. Two shapes of a
  // start: a file that imports child_process and names git at all, and any call whose first
  // argument is the git binary (a generic runner elsewhere would start it just the same).
  const childProcess =
    /from\s+'(?:node:)?child_process'|import\(\s*'(?:node:)?child_process'\s*\)|require\(\s*'(?:node:)?child_process'\s*\)/;
  const namesGit = /['"`](?:[\w./-]*\/)?git['"`]/;
  const gitAsCommand = /\(\s*['"`](?:[\w./-]*\/)?git['"`]\s*,/;
  const startsGit = (code: string) =>
    (childProcess.test(code) && namesGit.test(code)) || gitAsCommand.test(code);
  const outside = (file: string) => !file.startsWith('src/host-git/');

  it('no other file in src/ starts git', async () => {
    const hits = [...(await filesMatching(gitAsCommand)), ...(await filesMatching(childProcess))];
    const starting: string[] = [];
    for (const file of new Set(hits)) {
      const code = (await readFile(path.join(ROOT, file), 'utf8')).replace(
        /\/\*[\s\S]*?\*\/|^\s*\/\/.*$/gm,
        '',
      );
      if (outside(file) && startsGit(code)) starting.push(file);
    }
    expect(starting).toEqual([]);
  });

  it('the check sees host-git itself start git (so the test above can fail)', async () => {
    expect((await filesMatching(childProcess)).filter((f) => !outside(f))).not.toEqual([]);
    const code = (await readFile(path.join(ROOT, 'src/host-git/run.ts'), 'utf8')).replace(
      /\/\*[\s\S]*?\*\/|^\s*\/\/.*$/gm,
      '',
    );
    expect(startsGit(code)).toBe(true);
  });

  // Planted samples: what the check must catch, and what it must leave alone.
  it.each([
    ["import { spawn } from 'node:child_process';\nspawn('git', ['archive', commit]);", true],
    ["import { execFile } from 'child_process';\nexecFile('git', ['ls-files'], cb);", true],
    [
      "import { execFileSync } from 'node:child_process';\nconst bin = 'git';\nexecFileSync(bin, args);",
      true,
    ],
    ["const { spawn } = await import('node:child_process');\nspawn(\"/usr/bin/git\", ['status']);", true],
    ["await runStreaming('git', ['fetch'], { onLine });", true],
    ["import { spawn } from 'node:child_process';\nspawn('tar', ['-x']);", false],
    ["packages: ['nodejs', 'npm', 'git', 'ca-certificates'],", false],
    ["if (path === '.git' || path.startsWith('.git/')) return 'git';", false],
  ])('the check reads %s as starting git: %s', (code, expected) => {
    expect(startsGit(code)).toBe(expected);
  });
});

// ---------------------------------------------------------------------------------------
// The import graph of src/: every file (src-relative, `/`-separated) and what it imports of
// src/, type imports, re-exports, dynamic imports and `declare module` augmentations included.
// Read with TypeScript's own scanner, so an import inside a comment or a string is not one.

type ImportGraph = ReadonlyMap<string, readonly string[]>;

interface SourceTree {
  graph: ImportGraph;
  lines: ReadonlyMap<string, number>;
}

let tree: Promise<SourceTree> | undefined;

/** src/ read once for every rule below. */
function sourceTree(): Promise<SourceTree> {
  tree ??= (async () => {
    const src = path.join(ROOT, 'src');
    const texts = new Map<string, string>();
    for (const file of await sourceFiles(src)) {
      texts.set(path.relative(src, file).split(path.sep).join('/'), await readFile(file, 'utf8'));
    }
    const graph = new Map<string, string[]>();
    const lines = new Map<string, number>();
    for (const [file, text] of texts) {
      graph.set(file, importTargets(file, text, texts));
      lines.set(file, lineCount(text));
    }
    return { graph, lines };
  })();
  return tree;
}

/** Lines as `wc -l` counts them, and a last line without its newline. */
function lineCount(text: string): number {
  return text.split('\n').length - (text.endsWith('\n') ? 1 : 0);
}

function importTargets(file: string, text: string, known: ReadonlyMap<string, unknown>): string[] {
  const targets = new Set<string>();
  for (const { fileName } of ts.preProcessFile(text, true, true).importedFiles) {
    if (!fileName.startsWith('.')) continue;
    const resolved = path.posix.normalize(path.posix.join(path.posix.dirname(file), fileName));
    const asTs = resolved.replace(/\.js$/, '.ts');
    const target = known.has(asTs)
      ? asTs
      : known.has(`${resolved}/index.ts`)
        ? `${resolved}/index.ts`
        : undefined;
    if (target && target !== file) targets.add(target);
  }
  return [...targets].sort();
}

/** `cli/index.ts` -> `cli/`; `main.ts` -> `main.ts`. */
function topEntry(file: string): string {
  const slash = file.indexOf('/');
  return slash < 0 ? file : file.slice(0, slash + 1);
}

// ---------------------------------------------------------------------------------------

/**
 * The house's layers, top to bottom: a file may import its own layer and any below it, never
 * one above. From AGENTS.md (cli -> work -> fix/evals -> agent/changes/runs ->
 * sandbox/llm/catalog; nothing in sandbox/ or llm/ knows about catalogs) and the graph as it
 * is. Every top-level folder and file of src/ has a row: a new one is placed here first.
 */
const LAYERS: ReadonlyArray<{ layer: string; entries: readonly string[] }> = [
  { layer: 'the entry point', entries: ['main.ts'] },
  { layer: 'the commands', entries: ['cli/'] },
  { layer: 'above the flows', entries: ['work/', 'view/', 'demo.ts'] },
  { layer: 'the flows', entries: ['evals/', 'fix/'] },
  {
    layer: 'the parts of a run',
    entries: [
      'agent/',
      'agent-kinds/',
      'mcp/',
      'changes/',
      'runs/',
      'model-bridge/',
      'fleet/',
      'test-results/',
    ],
  },
  { layer: 'what a run is about', entries: ['catalog/'] },
  { layer: 'engines and models', entries: ['sandbox/', 'llm/'] },
  { layer: 'what an image is built from', entries: ['image-context/'] },
  { layer: "the host's git", entries: ['host-git/'] },
  {
    layer: 'neutral leaves',
    entries: [
      'errors.ts',
      'outcomes.ts',
      'format.ts',
      'html/',
      'atomic-write.ts',
      'read-own-file.ts',
      'repo-files.ts',
      'yaml-validate.ts',
      'egress-policy.ts',
      'numbers.ts',
      'object-names.ts',
      'version.ts',
      'package-root.ts',
    ],
  },
];

/** Imports from a layer to one above it, and files in no layer. */
function upwardImports(graph: ImportGraph): string[] {
  const depth = new Map(LAYERS.flatMap(({ entries }, i) => entries.map((e) => [e, i] as const)));
  const problems: string[] = [];
  for (const [file, targets] of graph) {
    const from = depth.get(topEntry(file));
    if (from === undefined) {
      problems.push(`${file}: ${topEntry(file)} is in no layer`);
      continue;
    }
    for (const target of targets) {
      const to = depth.get(topEntry(target));
      if (to !== undefined && to < from)
        problems.push(`${file} -> ${target} (${LAYERS[from]?.layer} imports ${LAYERS[to]?.layer})`);
    }
  }
  return problems.sort();
}

/** Strongly connected components of more than one node (Tarjan): every cycle, each once. */
function cycles(graph: ImportGraph): string[][] {
  let next = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (node: string): void => {
    index.set(node, next);
    low.set(node, next);
    next++;
    stack.push(node);
    onStack.add(node);
    for (const target of graph.get(node) ?? []) {
      if (!index.has(target)) {
        visit(target);
        low.set(node, Math.min(low.get(node)!, low.get(target)!));
      } else if (onStack.has(target)) low.set(node, Math.min(low.get(node)!, index.get(target)!));
    }
    if (low.get(node) !== index.get(node)) return;
    const component: string[] = [];
    let member: string;
    do {
      member = stack.pop()!;
      onStack.delete(member);
      component.push(member);
    } while (member !== node);
    if (component.length > 1) found.push(component.sort());
  };
  for (const node of graph.keys()) if (!index.has(node)) visit(node);
  return found.sort();
}

/** The graph between top-level folders (and root files). */
function folderGraph(graph: ImportGraph): ImportGraph {
  const folders = new Map<string, Set<string>>();
  for (const [file, targets] of graph) {
    const from = topEntry(file);
    const edges = folders.get(from) ?? new Set<string>();
    for (const target of targets) if (topEntry(target) !== from) edges.add(topEntry(target));
    folders.set(from, edges);
  }
  return new Map([...folders].map(([folder, edges]) => [folder, [...edges].sort()]));
}

describe('arrows point down', () => {
  it('no file imports a layer above its own (type imports included), and every file is in a layer', async () => {
    expect(upwardImports((await sourceTree()).graph)).toEqual([]);
  });

  it('the check sees an import up, a type import up, and a folder in no layer (so the test above can fail)', () => {
    const planted = new Map([
      ['evals/report.ts', ['cli/index.ts']],
      ['catalog/schema.ts', ['fix/types.ts', 'llm/cost.ts']],
      ['cli/index.ts', ['evals/report.ts', 'errors.ts']],
      ['newfolder/x.ts', []],
    ]);
    expect(upwardImports(planted)).toEqual([
      'catalog/schema.ts -> fix/types.ts (what a run is about imports the flows)',
      'evals/report.ts -> cli/index.ts (the flows imports the commands)',
      'newfolder/x.ts: newfolder/ is in no layer',
    ]);
    expect(
      importTargets(
        'catalog/schema.ts',
        "import type { Run } from '../fix/types.js';\n// import { x } from '../cli/index.js'\nconst glob = 'src/**/*.ts';",
        new Map([
          ['fix/types.ts', 1],
          ['cli/index.ts', 1],
        ]),
      ),
    ).toEqual(['fix/types.ts']);
  });
});

describe('no import cycles', () => {
  it('between files (type imports included)', async () => {
    expect(cycles((await sourceTree()).graph)).toEqual([]);
  });

  it('between top-level folders', async () => {
    expect(cycles(folderGraph((await sourceTree()).graph))).toEqual([]);
  });

  it('the check finds a cycle of two files, one of three, and one between folders (so the tests above can fail)', () => {
    const planted = new Map([
      ['fix/baseline.ts', ['fix/types.ts']],
      ['fix/types.ts', ['fix/baseline.ts', 'changes/change-set.ts']],
      ['changes/change-set.ts', ['changes/ignore.ts']],
      ['changes/ignore.ts', ['changes/pristine.ts', 'catalog/x.ts']],
      ['changes/pristine.ts', ['changes/change-set.ts']],
      ['catalog/x.ts', ['fix/run-fix.ts']],
      ['fix/run-fix.ts', []],
    ]);
    expect(cycles(planted)).toEqual([
      ['changes/change-set.ts', 'changes/ignore.ts', 'changes/pristine.ts'],
      ['fix/baseline.ts', 'fix/types.ts'],
    ]);
    expect(cycles(folderGraph(planted))).toEqual([['catalog/', 'changes/', 'fix/']]);
  });
});

// ---------------------------------------------------------------------------------------

const MAX_LINES = 700;

function longFiles(lines: ReadonlyMap<string, number>, limit = MAX_LINES): string[] {
  return [...lines]
    .filter(([, count]) => count > limit)
    .map(([file, count]) => `${file}: ${count} lines`)
    .sort();
}

describe('no file in src/ is over 700 lines', () => {
  it('none', async () => {
    expect(longFiles((await sourceTree()).lines)).toEqual([]);
  });

  it('the check counts lines as wc -l does (so the tests above can fail)', () => {
    const text = (n: number) => 'x\n'.repeat(n);
    expect(
      longFiles(
        new Map([
          ['a.ts', lineCount(text(700))],
          ['b.ts', lineCount(text(701))],
          ['c.ts', lineCount(`${text(700)}x`)],
        ]),
      ),
    ).toEqual(['b.ts: 701 lines', 'c.ts: 701 lines']);
  });
});

// ---------------------------------------------------------------------------------------

/**
 * Names a reader may meet twice: `index.ts` and `types.ts` (the folder names which), and a
 * command's file in cli/commands/ named after its command (beside what it calls).
 */
function mayRepeat(file: string): boolean {
  const base = path.posix.basename(file);
  return base === 'index.ts' || base === 'types.ts' || path.posix.dirname(file) === 'cli/commands';
}

/** Groups of files sharing a name where at least two are not allowed to repeat. */
function repeatedNames(files: Iterable<string>): string[][] {
  const byName = new Map<string, string[]>();
  for (const file of files) {
    const base = path.posix.basename(file);
    byName.set(base, [...(byName.get(base) ?? []), file]);
  }
  return [...byName.values()]
    .filter((group) => group.filter((f) => !mayRepeat(f)).length > 1)
    .map((group) => group.sort())
    .sort();
}

describe('names that say which one', () => {
  it('no two files in src/ share a name a reader could confuse', async () => {
    expect(repeatedNames((await sourceTree()).graph.keys())).toEqual([]);
  });

  it('the check sees the names this rule renamed, and lets types, index and commands repeat (so the tests above can fail)', () => {
    expect(
      repeatedNames([
        'agent/library.ts',
        'fix/library.ts',
        'fix/egress.ts',
        'sandbox/docker/egress.ts',
        'cli/commands/check.ts',
        'fix/check.ts',
        'fix/types.ts',
        'llm/types.ts',
        'cli/index.ts',
        'agent/tools/index.ts',
      ]),
    ).toEqual([
      ['agent/library.ts', 'fix/library.ts'],
      ['fix/egress.ts', 'sandbox/docker/egress.ts'],
    ]);
  });
});

// ---------------------------------------------------------------------------------------

const SOURCES = 'evals/sources/';
/** What of the sources folder the rest of the house may name: the registry and the interface. */
const SOURCE_SEAM = [`${SOURCES}index.ts`, `${SOURCES}task-source.ts`];

/** Files outside the sources folder that name a source module (anything there but the registry and the interface). */
function sourceModuleReaches(graph: ImportGraph): string[] {
  const reaches: string[] = [];
  for (const [file, targets] of graph) {
    if (file.startsWith(SOURCES)) continue;
    for (const target of targets)
      if (target.startsWith(SOURCES) && !SOURCE_SEAM.includes(target)) reaches.push(`${file} -> ${target}`);
  }
  return reaches.sort();
}

describe('task sources are known by their registry alone', () => {
  it('no file outside src/evals/sources/ names a source module (type imports included)', async () => {
    expect(sourceModuleReaches((await sourceTree()).graph)).toEqual([]);
  });

  it('every source file (`*-source.ts`) is registered in src/evals/sources/index.ts', async () => {
    const { graph } = await sourceTree();
    const sources = [...graph.keys()].filter(
      (f) => f.startsWith(SOURCES) && f.endsWith('-source.ts') && !SOURCE_SEAM.includes(f),
    );
    expect(sources.length).toBeGreaterThanOrEqual(3);
    expect(sources.filter((f) => !graph.get(`${SOURCES}index.ts`)?.includes(f))).toEqual([]);
  });

  it('the check sees a reach past the registry, and not the registry or the interface (so the test above can fail)', () => {
    expect(
      sourceModuleReaches(
        new Map([
          ['cli/commands/eval.ts', ['evals/sources/harbor-materialize.ts', 'evals/sources/index.ts']],
          ['evals/summary.ts', ['evals/sources/harbor-source.ts']],
          ['evals/run-suite.ts', ['evals/sources/index.ts', 'evals/sources/task-source.ts']],
          ['evals/sources/index.ts', ['evals/sources/harbor-source.ts']],
        ]),
      ),
    ).toEqual([
      'cli/commands/eval.ts -> evals/sources/harbor-materialize.ts',
      'evals/summary.ts -> evals/sources/harbor-source.ts',
    ]);
  });
});

// ---------------------------------------------------------------------------------------

/** What the first column of AGENTS.md's "Where things live" names, row by row. */
function mapPaths(agentsMd: string): string[] {
  const start = agentsMd.indexOf('## Where things live');
  const section = agentsMd.slice(start, agentsMd.indexOf('\n## ', start + 1));
  return section
    .split('\n')
    .filter((line) => line.startsWith('| `'))
    .flatMap((line) => [...(line.split('|')[1] ?? '').matchAll(/`([^`]+)`/g)].map((m) => m[1] ?? ''));
}

/** Top-level entries of src/ no row names, and rows naming what does not exist. */
function mapProblems(named: readonly string[], entries: readonly string[], exists: (p: string) => boolean) {
  return {
    unnamed: entries.filter((entry) => !named.includes(`src/${entry}`)),
    absent: named.filter((p) => !exists(p)),
  };
}

describe("AGENTS.md's map of the house", () => {
  it('has a row for every top-level folder and file of src/, and names nothing that is not there', async () => {
    const { graph } = await sourceTree();
    const entries = [...new Set([...graph.keys()].map(topEntry))].sort();
    const named = mapPaths(await readFile(path.join(ROOT, 'AGENTS.md'), 'utf8'));
    const exists = (p: string) => existsSync(path.join(ROOT, p));
    expect(mapProblems(named, entries, exists)).toEqual({ unnamed: [], absent: [] });
  });

  it('the check sees a folder without a row and a row for a folder that is gone (so the test above can fail)', () => {
    const named = mapPaths(
      '## Where things live\n\n| folder | concept |\n| --- | --- |\n| `src/cli/` | commands |\n| `src/gone/` | was here |\n\n## Next\n| `src/fix/` | not in the map |\n',
    );
    expect(named).toEqual(['src/cli/', 'src/gone/']);
    expect(mapProblems(named, ['cli/', 'fix/'], (p) => p !== 'src/gone/')).toEqual({
      unnamed: ['fix/'],
      absent: ['src/gone/'],
    });
  });
});

describe('the Docker engine client is one folder', () => {
  const importsDockerode = /from 'dockerode'|import\('dockerode'\)|require\('dockerode'\)/;
  const inEngineFolder = (file: string) => file.startsWith('src/sandbox/docker/engine/');

  it('only src/sandbox/docker/engine/ imports dockerode', async () => {
    const hits = await filesMatching(importsDockerode);
    expect(hits.filter(inEngineFolder).length).toBeGreaterThan(0);
    expect(hits.filter((f) => !inEngineFolder(f))).toEqual([]);
  });

  // dockerode pastes these names into request paths unescaped (`/images/<name>/json`).
  const nameIntoPath =
    /\.get(?:Image|Container|Network|Volume|Exec|Plugin|Secret|Config|Node|Service|Task)\((?!(?:imageInPath|containerInPath|networkInPath)\()/;

  it('every name dockerode puts into a request path goes through its parser and escaper (engine/api-paths.ts)', async () => {
    expect(await filesMatching(nameIntoPath)).toEqual([]);
  });

  it('the path check sees a bare name and lets a checked one through', () => {
    expect(nameIntoPath.test('await this.docker.getImage(ref).inspect();')).toBe(true);
    expect(nameIntoPath.test('this.docker.getContainer(id).start()')).toBe(true);
    expect(nameIntoPath.test('const network = this.docker.getNetwork(networkInPath(id));')).toBe(false);
    expect(nameIntoPath.test('return this.docker.getContainer(containerInPath(id));')).toBe(false);
  });

  it('the check sees every way of importing it', () => {
    expect(importsDockerode.test("import Docker from 'dockerode';")).toBe(true);
    expect(importsDockerode.test("import type Docker from 'dockerode';")).toBe(true);
    expect(importsDockerode.test("const m = await import('dockerode');")).toBe(true);
    expect(importsDockerode.test("import { x } from 'dockerode-compose';")).toBe(false);
  });
});

describe('a sandbox container is written once (sandbox/container/container-spec.ts)', () => {
  // The create body's HostConfig (and the config keys beside it that harden a container), as
  // values are written (a type that only reads one back is not a rendering) ...
  const hostConfigField =
    /\b(?:HostConfig|CapDrop|CapAdd|SecurityOpt|PidsLimit|NanoCpus|MemorySwap|Ulimits|IpcMode|NetworkMode|NetworkDisabled|Tmpfs|LogConfig|Privileged|ReadonlyRootfs|RestartPolicy|ExtraHosts|StorageOpt|Binds|Mounts)\s*:(?!\s*(?:number|string|boolean|unknown)\b)/;
  // ... and a container CLI's hardening flags, as code writes them (quoted, in an argument list).
  const hardeningFlag =
    /['"`]--(?:cap-drop|cap-add|security-opt|pids-limit|memory|memory-swap|cpus|ulimit|tmpfs|ipc|log-driver|sysctl|storage-opt|add-host|dns|dns-search|dns-option|no-healthcheck|init|privileged|read-only|volume|mount|publish)(?:['"`=]|\s*,)|['"`]--network['"`]/;

  it('only the Docker API rendering writes HostConfig fields', async () => {
    expect(await filesMatching(hostConfigField)).toEqual(['src/sandbox/docker/engine/create-body.ts']);
  });

  it('only the container CLI rendering writes hardening flags', async () => {
    expect(await filesMatching(hardeningFlag)).toEqual(['src/sandbox/container/cli-args.ts']);
  });

  it.each([
    ["HostConfig: { NetworkMode: 'none', CapDrop: ['ALL'] },", true],
    ['      PidsLimit: options.pids,', true],
    ["const network = String(details.hostConfig.NetworkMode ?? '');", false],
    ['const host = details.hostConfig as { NanoCpus: number };', false],
  ])('the HostConfig check reads %s as writing a field: %s', (code, expected) => {
    expect(hostConfigField.test(code)).toBe(expected);
  });

  it.each([
    ["args.push('--cap-drop', 'ALL', '--security-opt', 'no-new-privileges');", true],
    ['const limit = `--pids-limit=${pids}`;', true],
    ["await run('docker', ['run', '--network', 'none', image]);", true],
    ["runtimeArgs: ['--network=none'] // runsc's own flag", false],
    ['detail: `a hardened --network none container of ${image} failed`', false],
    ['hint: "(`--runtime`, catalog sandbox.runtime)"', false],
  ])('the flag check reads %s as writing a hardening flag: %s', (code, expected) => {
    expect(hardeningFlag.test(code)).toBe(expected);
  });
});

describe("the Docker backend's rooms: arrows point down", () => {
  // engine/ (the client) < labels, host tools, runtimes, layers < network/ < images/ <
  // operator/ < fleet/ < the backend itself (docker-sandbox, docker-provider, index).
  const ROOMS: [RegExp, number][] = [
    [/^src\/sandbox\/docker\/engine\//, 0],
    [/^src\/sandbox\/docker\/fleet\/engine-ref\.ts$/, 0],
    [/^src\/sandbox\/docker\/(labels|host-tools|runtimes|upper-dir)\.ts$/, 1],
    [/^src\/sandbox\/docker\/network\//, 2],
    [/^src\/sandbox\/docker\/images\//, 3],
    [/^src\/sandbox\/docker\/operator\//, 4],
    [/^src\/sandbox\/docker\/fleet\//, 5],
    [/^src\/sandbox\/docker\//, 6],
  ];
  const roomOf = (file: string) => ROOMS.find(([pattern]) => pattern.test(file))?.[1];

  it('no file of the backend imports a room above its own', async () => {
    const up: string[] = [];
    for (const full of await sourceFiles(path.join(ROOT, 'src', 'sandbox', 'docker'))) {
      const file = path.relative(ROOT, full).split(path.sep).join('/');
      for (const target of await importsOf(full)) {
        const to = roomOf(target.replace(/\.js$/, '.ts'));
        if (to !== undefined && to > roomOf(file)!) up.push(`${file} -> ${target}`);
      }
    }
    expect(up).toEqual([]);
  });

  it('the rooms are ordered as the check reads them', () => {
    expect(roomOf('src/sandbox/docker/engine/containers.ts')).toBeLessThan(
      roomOf('src/sandbox/docker/images/repo-image.ts')!,
    );
    expect(roomOf('src/sandbox/docker/images/repo-image.ts')).toBeLessThan(
      roomOf('src/sandbox/docker/operator/engine-doctor.ts')!,
    );
    expect(roomOf('src/sandbox/docker/operator/collect-garbage.ts')).toBeLessThan(
      roomOf('src/sandbox/docker/docker-sandbox.ts')!,
    );
  });
});
