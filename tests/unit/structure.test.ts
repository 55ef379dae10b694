/**
 * Rules of the code's shape that a change could break without any behaviour test noticing:
 * one folder talks to dockerode, one file decides how the process exits, and only the sandbox
 * registry reaches a backend's folder.
 */
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
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
  it('only sandbox/registry.ts imports the Docker backend (type imports and dynamic imports too)', async () => {
    expect(await importersOf('src/sandbox/docker')).toEqual(['src/sandbox/registry.ts']);
  });

  it('the image context code knows no backend', async () => {
    const reaching: string[] = [];
    for (const file of await sourceFiles(path.join(ROOT, 'src', 'image-context'))) {
      // The one thing of sandbox/ it may name is the egress policy: the catalog's rule as data
      // (pure, no engine), which a build request carries for the build phase.
      const reaches = (t: string) => t.startsWith('src/sandbox/') && t !== 'src/sandbox/egress/policy.js';
      if ((await importsOf(file)).some(reaches)) reaching.push(path.relative(ROOT, file));
    }
    expect(reaching).toEqual([]);
  });

  it('the seam check sees a reach into the backend (so the test above can fail)', async () => {
    const targets = await importsOf(path.join(ROOT, 'src', 'sandbox', 'registry.ts'));
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
