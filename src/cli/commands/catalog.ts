import { ConfigError, HarnessError } from '../../errors.js';
import { loadCatalog } from '../../catalog/load.js';
import { catalogJsonSchemaText } from '../../catalog/json-schema.js';
import { testLayers } from '../../catalog/schema.js';
import { print, printJson, type CliContext } from '../context.js';

interface FileVerdict {
  file: string;
  ok: boolean;
  name?: string;
  rules?: number;
  editableFiles?: string[];
  testLayers?: string[];
  problems: string[];
}

/** Validates every file given and reports all problems of all files at once. */
export async function catalogValidateCommand(
  ctx: CliContext,
  files: string[],
  options: { json?: boolean },
): Promise<number> {
  const verdicts: FileVerdict[] = [];
  for (const file of files) {
    try {
      const loaded = await loadCatalog(file, { cwd: ctx.cwd });
      verdicts.push({
        file: loaded.displayPath,
        ok: true,
        name: loaded.catalog.name,
        rules: Object.keys(loaded.catalog.rules).length,
        editableFiles: loaded.catalog.agent.editableFiles,
        testLayers: testLayers(loaded.catalog).map((l) => `${l.name}: ${l.command}`),
        problems: [],
      });
    } catch (error) {
      if (!(error instanceof HarnessError)) throw error;
      verdicts.push({
        file,
        ok: false,
        problems:
          error instanceof ConfigError && error.problems.length > 0 ? error.problems : [error.message],
      });
    }
  }
  if (options.json) {
    printJson(ctx, { ok: verdicts.every((v) => v.ok), files: verdicts });
  } else {
    for (const v of verdicts) {
      if (v.ok) {
        print(
          ctx,
          `ok  ${v.file}: ${v.name}, ${v.rules} rule(s), editable ${v.editableFiles?.join(', ')}, tests ${v.testLayers?.join(' | ')}`,
        );
      } else {
        print(ctx, `bad ${v.file}: ${v.problems.length} problem(s)`);
        for (const p of v.problems) print(ctx, `  ${p}`);
      }
    }
  }
  return verdicts.every((v) => v.ok) ? 0 : 2;
}

export async function catalogSchemaCommand(ctx: CliContext): Promise<number> {
  print(ctx, catalogJsonSchemaText());
  return 0;
}
