/**
 * Base images, honestly: a repo recipe's `ARG BASE_IMAGE=<default>` is what it builds on
 * unless the catalog says otherwise; a default that names a missing image is refused naming
 * it; a failed build names the base it ran on; `exec --catalog` builds and runs as the
 * catalog's runs do; `doctor` puts no check mark next to a base that is missing. Real Docker,
 * the built CLI.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildRepoImage } from '../../src/sandbox/docker/images/repo-image.js';
import { ensureBaseImage } from '../../src/sandbox/docker/images/ensure-base.js';
import { dockerEngine } from '../../src/sandbox/docker/engine/index.js';
import { cleanEnv, runCli, ROOT } from '../helpers/cli.js';

const ENV = cleanEnv();
let scratch: string;
/** An image on the node base with a marker file: a base a recipe can name by its ARG default. */
let markerBase: string;
const images: string[] = [];

async function repo(name: string, files: Record<string, string>): Promise<string> {
  const dir = join(scratch, name);
  await mkdir(dir, { recursive: true });
  for (const [path, content] of Object.entries(files)) await writeFile(join(dir, path), content);
  return dir;
}

interface ExecJson {
  image: string;
  baseImage?: string;
  exitCode: number;
  stdout: string;
}

async function exec(args: string[]) {
  const r = await runCli(['exec', ...args], { env: ENV, cwd: scratch });
  return r;
}

describe('base images (real Docker)', { timeout: 300_000 }, () => {
  beforeAll(async () => {
    await dockerEngine().ping(5000);
    await ensureBaseImage('node', {});
    scratch = await mkdtemp(join(tmpdir(), 'sandbox-harness-base-images-'));
    const base = await repo('marker-base', {
      'Dockerfile.sandbox':
        'ARG BASE_IMAGE=sandbox-harness/base-node:20\nFROM ${BASE_IMAGE}\nUSER root\nRUN echo h20-marker > /opt/h20-marker\nUSER sandbox\nWORKDIR /workspace\n',
      'a.txt': 'base\n',
    });
    const built = await buildRepoImage({ repoDir: base, rebuild: false });
    markerBase = built.tag;
    images.push(built.tag);
  }, 900_000);

  afterAll(async () => {
    for (const image of images)
      await dockerEngine()
        .images.remove(image)
        .catch(() => undefined);
    await rm(scratch, { recursive: true, force: true });
  });

  it("a repo recipe's ARG BASE_IMAGE default is built on when the catalog names no base, and the catalog's base wins over it", async () => {
    const dir = await repo('names-its-base', {
      'Dockerfile.sandbox': `ARG BASE_IMAGE=${markerBase}\nFROM \${BASE_IMAGE}\nCOPY --chown=1000:1000 . /workspace\nUSER sandbox\nWORKDIR /workspace\n`,
      'hello.txt': 'hello\n',
    });
    const r = await exec(['--repo', dir, '--json', '--', 'cat /opt/h20-marker; cat hello.txt']);
    expect(r.code, r.stderr).toBe(0);
    const json = JSON.parse(r.stdout) as ExecJson;
    images.push(json.image);
    expect(json.stdout).toBe('h20-marker\nhello\n');
    expect(json.baseImage).toBe(markerBase);

    // With sandbox.baseImage in the catalog, that base is the build argument and wins.
    const catalog = join(scratch, 'names-its-base.yaml');
    await writeFile(
      catalog,
      [
        'name: names-its-base',
        'owner: tests',
        'repo: names-its-base',
        'rules: {}',
        'agent:',
        '  editableFiles: [hello.txt]',
        '  testCommand: cat hello.txt',
        'sandbox:',
        '  baseImage: sandbox-harness/base-node:20',
        '  env:',
        '    GREETING: from-the-catalog',
        '',
      ].join('\n'),
    );
    const viaCatalog = await exec([
      '--catalog',
      catalog,
      '--json',
      '--',
      'test -e /opt/h20-marker && echo marker || echo no-marker; echo $GREETING; echo $SERVICE_CATALOG',
    ]);
    expect(viaCatalog.code, viaCatalog.stderr).toBe(0);
    const fromCatalog = JSON.parse(viaCatalog.stdout) as ExecJson;
    images.push(fromCatalog.image);
    expect(fromCatalog.baseImage).toBe('sandbox-harness/base-node:20');
    expect(fromCatalog.stdout).toBe('no-marker\nfrom-the-catalog\n/etc/sandbox-harness/catalog.json\n');

    // --base-image does the same from the command line.
    const flag = await exec([
      '--repo',
      dir,
      '--base-image',
      'sandbox-harness/base-node:20',
      '--json',
      '--',
      'test -e /opt/h20-marker || echo no-marker',
    ]);
    expect(flag.code, flag.stderr).toBe(0);
    expect(JSON.parse(flag.stdout)).toMatchObject({
      baseImage: 'sandbox-harness/base-node:20',
      stdout: 'no-marker\n',
    });
  });

  it('a default that names an image the engine does not have is refused, naming the file, line and image (exit 2)', async () => {
    const dir = await repo('missing-base', {
      'Dockerfile.sandbox':
        '# a base nobody has\nARG BASE_IMAGE=sandbox-harness-test/no-such-base:1\nFROM ${BASE_IMAGE}\nCOPY . /workspace\n',
    });
    const r = await exec(['--repo', dir, '--', 'true']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(
      `${join(dir, 'Dockerfile.sandbox')}:2: the recipe's base image sandbox-harness-test/no-such-base:1`,
    );
    expect(r.stderr).toMatch(/hint: .*sandbox\.baseImage/);
  });

  it('a build that fails says which base it ran on', async () => {
    const dir = await repo('needs-pip', {
      'Dockerfile.sandbox':
        'ARG BASE_IMAGE=sandbox-harness/base-node:20\nFROM ${BASE_IMAGE}\nCOPY . /workspace\nRUN pip install --no-index nothing\n',
    });
    const r = await exec(['--repo', dir, '--', 'true']);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(
      /building sandbox-harness\/repo-needs-pip:\w+ on sandbox-harness\/base-node:20 failed at Step \d+\/\d+ : RUN pip install/,
    );
    expect(r.stderr).toMatch(/pip: not found/);
  });

  it('exec --catalog builds and runs the bundled example as its runs do', async () => {
    const r = await exec([
      '--catalog',
      join(ROOT, 'examples', 'shipping-service', 'shipping-service.yaml'),
      '--json',
      '--',
      'echo $SERVICE_CATALOG; grep -c freeShippingThreshold /etc/sandbox-harness/catalog.json',
    ]);
    expect(r.code, r.stderr).toBe(0);
    const json = JSON.parse(r.stdout) as ExecJson;
    expect(json.baseImage).toBe('sandbox-harness/base-node:20');
    expect(json.stdout).toBe('/etc/sandbox-harness/catalog.json\n1\n');
  });

  it('doctor lists the base images; one that is missing never gets a check mark', async () => {
    const r = await runCli(['doctor', '--json'], { env: ENV });
    const report = JSON.parse(r.stdout) as {
      checks: { name: string; ok: boolean; warning?: true; detail: string; fix?: string }[];
    };
    const row = report.checks.find((c) => c.name === 'base-images')!;
    expect(row.ok).toBe(true);
    const human = await runCli(['doctor'], { env: ENV });
    const line = human.stdout.split('\n').find((l) => l.includes('base-images'))!;
    const python = await dockerEngine().images.inspect('sandbox-harness/base-python:3');
    if (python) {
      expect(row.detail).toContain('python: sandbox-harness/base-python:3');
      expect(line.trim().startsWith('✓')).toBe(true);
    } else {
      expect(row.detail).toContain('python: not built (optional)');
      expect(row.warning).toBe(true);
      expect(row.fix).toContain('sandbox-harness images ensure python');
      expect(line.trim().startsWith('!')).toBe(true);
      expect(line).not.toContain('✓');
      expect(human.stdout).toMatch(/hint: .*sandbox-harness images ensure python/);
    }
  });
});
