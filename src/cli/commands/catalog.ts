/** `catalog validate | schema`: service catalogs checked, and their JSON Schema. */
import { Command } from '@commander-js/extra-typings';
import { ConfigError, HarnessError } from '../../errors.js';
import { print, printJson, type CliContext } from '../cli-context.js';
import { declareCommand, declareGroup, type OptionsOf } from '../declare-command.js';

function validateDeclaration() {
  return new Command('validate')
    .description('validate catalog files; every problem with file:line:col')
    .argument('<file...>', 'catalog files')
    .option('--json', 'JSON output');
}

function schemaDeclaration() {
  return new Command('schema').description('print the JSON Schema of catalogs (also in catalog/schema.json)');
}

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
  options: OptionsOf<typeof validateDeclaration>,
): Promise<number> {
  const { loadCatalog } = await import('../../catalog/load.js');
  const { verificationLayers } = await import('../../catalog/schema.js');
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
        testLayers: verificationLayers(loaded.catalog).map((l) => `${l.name}: ${l.command}`),
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
  const { catalogJsonSchemaText } = await import('../../catalog/json-schema.js');
  print(ctx, catalogJsonSchemaText());
  return 0;
}

export const catalog = declareGroup(
  () => new Command('catalog').description('service catalogs: validate, JSON Schema'),
  [
    declareCommand(validateDeclaration, catalogValidateCommand),
    declareCommand(schemaDeclaration, catalogSchemaCommand),
  ],
);
