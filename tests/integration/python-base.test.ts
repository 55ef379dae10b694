/**
 * The Python base (`sandbox-harness/base-python:3`, built offline here from Debian packages)
 * runs pytest with no network and no package index: `pytest` and `python -m pytest` both run
 * the venv's Python, so a module a repo's recipe installs into the venv (as root, the way
 * `pip install` would) is importable from the tests; the venv stays out of the sandbox
 * user's reach; a `src/` layout runs without an install through `sandbox.env` PYTHONPATH.
 * Real Docker, the built CLI.
 */
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dockerEngine } from '../../src/sandbox/docker/engine/index.js';
import { BASE_IMAGES } from '../../src/sandbox/docker/images/base-images.js';
import { ensureBaseImage } from '../../src/sandbox/docker/images/ensure-base.js';
import { cleanEnv, runCli } from '../helpers/cli.js';

const ENV = cleanEnv();
let scratch = '';
const images: string[] = [];

describe('the Python base image (real Docker)', { timeout: 300_000 }, () => {
  beforeAll(async () => {
    await dockerEngine().ping(5000);
    // scripts/setup.sh makes it before the suite; this is for a run of this file alone.
    await ensureBaseImage('python', {});
    scratch = await mkdtemp(join(tmpdir(), 'sandbox-harness-python-base-'));
  }, 900_000);

  afterAll(async () => {
    for (const image of images)
      await dockerEngine()
        .images.remove(image)
        .catch(() => undefined);
    if (scratch) await rm(scratch, { recursive: true, force: true });
  });

  it('pytest and python -m pytest run the venv, offline; the sandbox user cannot write the venv', async () => {
    const repo = join(scratch, 'venv-module');
    await mkdir(join(repo, 'tests'), { recursive: true });
    await writeFile(
      join(repo, 'Dockerfile.sandbox'),
      [
        `ARG BASE_IMAGE=${BASE_IMAGES.python.tag}`,
        'FROM ${BASE_IMAGE}',
        'COPY --chown=1000:1000 . /workspace',
        'USER root',
        // What `pip install` of a package would do, without a package index: a module in the venv only.
        `RUN site="$(/opt/venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"; printf 'ANSWER = 42\\n' > "$site/venvonly.py"`,
        'USER sandbox',
        'WORKDIR /workspace',
        '',
      ].join('\n'),
    );
    await writeFile(
      join(repo, 'tests', 'test_venv.py'),
      'import venvonly\n\n\ndef test_module_from_the_venv():\n    assert venvonly.ANSWER == 42\n',
    );
    const line = [
      'pytest -q -p no:cacheprovider',
      'python -m pytest -q -p no:cacheprovider',
      'echo "network=$(ls /sys/class/net | tr "\\n" " ")"',
      '(touch /opt/venv/planted 2>/dev/null && echo venv=writable || echo venv=read-only)',
    ].join(' && ');
    const r = await runCli(['exec', '--repo', repo, '--json', '--timeout', '120', '--', line], { env: ENV });
    let json: { image: string; baseImage?: string; exitCode: number; stdout: string; stderr: string };
    try {
      json = JSON.parse(r.stdout) as typeof json;
    } catch {
      throw new Error(`exec did not print JSON (exit ${r.code}):\n${r.stdout}\n${r.stderr}`);
    }
    images.push(json.image);
    expect(json.baseImage).toBe(BASE_IMAGES.python.tag);
    expect(json.exitCode, `${json.stdout}\n${json.stderr}`).toBe(0);
    expect(json.stdout.match(/^1 passed\b/gm)).toHaveLength(2);
    expect(json.stdout).toMatch(/^network=lo $/m);
    expect(json.stdout).toMatch(/^venv=read-only$/m);
  });

  it('a src/ layout that would need `pip install -e .` runs offline with sandbox.env PYTHONPATH (exec --catalog)', async () => {
    const repo = join(scratch, 'src-layout');
    await mkdir(join(repo, 'src', 'orders'), { recursive: true });
    await mkdir(join(repo, 'tests'), { recursive: true });
    await writeFile(
      join(repo, 'pyproject.toml'),
      '[project]\nname = "orders"\nversion = "0.1.0"\n\n[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n',
    );
    await writeFile(join(repo, 'src', 'orders', '__init__.py'), 'def total(items):\n    return sum(items)\n');
    await writeFile(
      join(repo, 'tests', 'test_orders.py'),
      'from orders import total\n\n\ndef test_total():\n    assert total([1, 2]) == 3\n',
    );
    const catalog = join(scratch, 'src-layout.yaml');
    await writeFile(
      catalog,
      [
        'name: src-layout',
        'owner: team-test',
        'repo: src-layout',
        'sandbox:',
        `  baseImage: ${BASE_IMAGES.python.tag}`,
        '  env:',
        '    PYTHONPATH: src',
        'agent:',
        '  editableFiles: [src/**]',
        '  testCommand: python -m pytest -q',
        '',
      ].join('\n'),
    );
    const r = await runCli(
      [
        'exec',
        '--catalog',
        catalog,
        '--json',
        '--timeout',
        '120',
        '--',
        'python -m pytest -q -p no:cacheprovider',
      ],
      { env: ENV },
    );
    let json: { image: string; exitCode: number; stdout: string; stderr: string };
    try {
      json = JSON.parse(r.stdout) as typeof json;
    } catch {
      throw new Error(`exec did not print JSON (exit ${r.code}):\n${r.stdout}\n${r.stderr}`);
    }
    images.push(json.image);
    expect(json.exitCode, `${json.stdout}\n${json.stderr}`).toBe(0);
    expect(json.stdout).toMatch(/^1 passed\b/m);
  });
});
