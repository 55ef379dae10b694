/**
 * Where Harbor tasks come from on the command line: `eval <task folder>`, `eval <folder of
 * task folders>`, or a Harbor suite (YAML with `harbor:` naming one of those, plus a folder of
 * cassettes and the eval's defaults), as instance suites are wired.
 */
import { lstat, readFile } from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import { problemsError, validateYaml } from '../../yaml-validate.js';
import { ConfigError } from '../../errors.js';
import { suiteDefaults, suiteDefaultsSchema } from '../suite.js';
import { harborTaskDirs, loadHarborTasks } from './harbor.js';
import type { HarborSource } from './harbor-materialize.js';

const NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

const harborSuiteSchema = z.strictObject({
  name: z.string().regex(NAME, 'expected a name of letters, digits, ".", "_" or "-"'),
  harbor: z.string().min(1, 'expected a Harbor task folder, or a folder of them'),
  /** A folder with `<task id>.json` cassettes (a recorded model per task). */
  cassettes: z.string().min(1).optional(),
  defaults: suiteDefaultsSchema,
});

/** Whether a YAML suite file is a Harbor suite (has `harbor:`), without validating it. */
export function looksLikeHarborSuite(text: string): boolean {
  return /^harbor\s*:/m.test(text);
}

function slug(dir: string): string {
  return (
    path
      .basename(dir)
      .replace(/[^A-Za-z0-9._-]/g, '-')
      .replace(/^[^A-Za-z0-9]+/, '') || 'harbor'
  );
}

/**
 * A Harbor source for `file` (a folder or a Harbor suite), or undefined when it is neither,
 * so the caller tries the other formats.
 */
export async function loadHarborSource(
  file: string,
  displayPath: string,
  cwd: string,
): Promise<HarborSource | undefined> {
  const st = await lstat(file).catch(() => undefined);
  if (st?.isDirectory()) {
    const dirs = await harborTaskDirs(file);
    if (!dirs)
      throw new ConfigError(
        `${displayPath} is a folder, but neither a Harbor task folder nor a folder of them`,
        [],
        {
          hint: 'a Harbor task folder holds task.toml, instruction.md, environment/Dockerfile and tests/test.sh',
        },
      );
    return { file, name: slug(file), tasks: await loadHarborTasks(dirs, cwd), defaults: suiteDefaults() };
  }
  if (!st?.isFile() || !/\.ya?ml$/i.test(file)) return undefined;
  const text = await readFile(file, 'utf8');
  if (!looksLikeHarborSuite(text)) return undefined;
  const result = validateYaml(file, text, harborSuiteSchema, { displayPath });
  if (!result.ok) throw problemsError(result.parsed.file, result.problems);
  const raw = result.value;
  const base = path.dirname(file);
  const tasksDir = path.resolve(base, raw.harbor);
  const dirs = await harborTaskDirs(tasksDir);
  if (!dirs)
    throw new ConfigError(
      `${displayPath}: harbor: ${raw.harbor} is neither a Harbor task folder nor a folder of them (resolved to ${tasksDir})`,
    );
  return {
    file,
    name: raw.name,
    tasks: await loadHarborTasks(dirs, cwd),
    ...(raw.cassettes !== undefined ? { cassettes: path.resolve(base, raw.cassettes) } : {}),
    defaults: suiteDefaults(raw.defaults),
  };
}
