/**
 * Where an instance runs: a prebuilt image used as it is (SWE-bench-derived datasets call it
 * `image_name`), a base image the harness builds the instance's working copy on (`node`,
 * `python`, or any image), or a Dockerfile. The instance line says it, else its repo's spec in
 * the instance suite, else the suite's default; with none of them, a Python repo (a
 * `pyproject.toml`, `setup.py`, `setup.cfg` or `requirements.txt` and no `package.json`) runs on
 * the Python base and everything else on the harness's default (Node). Building stays offline
 * as in any catalog.
 */
import { copyFile, lstat } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import { ConfigError } from '../../errors.js';
import { imageRefProblem } from '../../object-names.js';
import { BASE_IMAGES, isBaseKind } from '../../sandbox/backend-registry.js';

/** An image reference, or a base the harness knows by name (`node`, `python`). */
export const imageName = (what: string, bases: boolean) =>
  z.string({ error: `expected ${what}` }).superRefine((value, ctx) => {
    if (bases && isBaseKind(value)) return;
    const problem = imageRefProblem(value);
    if (problem) ctx.addIssue({ code: 'custom', message: problem });
  });

/** The environment fields of an instance suite and of each of its repo specs (at most one). */
export const environmentFields = {
  image: imageName('an image reference', false).optional().meta({
    description:
      'A prebuilt image used as it is (it must hold the repo at /workspace, and its tools): catalog sandbox.image.',
  }),
  baseImage: imageName('"node", "python" or an image reference', true).optional().meta({
    description:
      'The image the working copy is built on: "node", "python" (the harness\'s bases) or any image reference: catalog sandbox.baseImage.',
  }),
  dockerfile: z.string().min(1, 'expected the path of a Dockerfile').optional().meta({
    description:
      "A Dockerfile (relative to the suite file) the working copy is built with, as the repo's own.",
  }),
};

export type Environment = {
  image?: string | undefined;
  baseImage?: string | undefined;
  dockerfile?: string | undefined;
};

/** The problem with an environment naming more than one way to get its image, or undefined. */
export function environmentProblem(env: Environment): string | undefined {
  const set = (['image', 'baseImage', 'dockerfile'] as const).filter((k) => env[k] !== undefined);
  return set.length > 1 ? `set one of image, baseImage and dockerfile, not ${set.join(' and ')}` : undefined;
}

/** `image_name` / `base_image` of an instance line, as an environment. */
export function instanceLineEnvironment(line: {
  image_name?: string | undefined;
  base_image?: string | undefined;
}): Environment {
  return {
    ...(line.image_name !== undefined ? { image: line.image_name } : {}),
    ...(line.base_image !== undefined ? { baseImage: line.base_image } : {}),
  };
}

/** Python project markers, and the one that says it is JavaScript after all. */
const PYTHON_MARKERS = ['pyproject.toml', 'setup.py', 'setup.cfg', 'requirements.txt'];

export interface ChosenEnvironment {
  /** What the instance's catalog says under `sandbox:`. */
  sandbox: { image?: string; baseImage?: string; dockerfile?: string; env?: Record<string, string> };
  /** Where the choice came from, for the preparing line. */
  from: string;
}

/**
 * The first environment of `choices` that names one (each with where it was set), else the
 * one the working copy's files call for. A Dockerfile is copied beside the catalog (`dir`),
 * which builds it with the working copy as its context.
 */
export async function chooseEnvironment(
  choices: readonly { env: Environment | undefined; from: string; base: string }[],
  repoDir: string,
  dir: string,
): Promise<ChosenEnvironment> {
  const chosen = choices.find((c) => c.env && (c.env.image ?? c.env.baseImage ?? c.env.dockerfile));
  const pythonEnv = pythonPath(repoDir);
  if (!chosen) {
    const python = PYTHON_MARKERS.some((m) => existsSync(path.join(repoDir, m)));
    if (python && !existsSync(path.join(repoDir, 'package.json')))
      return {
        sandbox: { baseImage: BASE_IMAGES.python.tag, env: pythonEnv },
        from: 'a Python project: the Python base',
      };
    return { sandbox: {}, from: "the harness's default" };
  }
  const env = chosen.env!;
  if (env.image !== undefined) return { sandbox: { image: env.image }, from: chosen.from };
  if (env.baseImage !== undefined) {
    const baseImage = isBaseKind(env.baseImage) ? BASE_IMAGES[env.baseImage].tag : env.baseImage;
    const python = baseImage === BASE_IMAGES.python.tag;
    return { sandbox: { baseImage, ...(python ? { env: pythonEnv } : {}) }, from: chosen.from };
  }
  const source = path.resolve(chosen.base, env.dockerfile!);
  const info = await lstat(source).catch(() => undefined);
  if (!info?.isFile())
    throw new ConfigError(`${chosen.from}: dockerfile ${env.dockerfile} is not a regular file (${source})`);
  await copyFile(source, path.join(dir, 'Dockerfile.instance'));
  return { sandbox: { dockerfile: 'Dockerfile.instance' }, from: chosen.from };
}

/**
 * The repo importable as its test command expects without an install (the build is offline):
 * its root first, as `python -m pytest` has it, then a `src/` layout's folder.
 */
function pythonPath(repoDir: string): Record<string, string> {
  const dirs = ['/workspace', ...(existsSync(path.join(repoDir, 'src')) ? ['/workspace/src'] : [])];
  return { PYTHONPATH: dirs.join(':') };
}
