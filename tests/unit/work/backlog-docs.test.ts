/**
 * docs/backlogs.md's first backlog is the one a newcomer copies: saved where the page says
 * (the root of a clone), every name in it must resolve as `work` resolves it, and it must
 * replay offline (a cassette for every item). tests/e2e/docs.test.ts runs it; this says why
 * it would fail in a second.
 */
import { readFile, writeFile } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadCatalog } from '../../../src/catalog/load.js';
import { loadTicket } from '../../../src/catalog/ticket.js';
import { loadCassette } from '../../../src/llm/replay.js';
import { loadBacklog } from '../../../src/work/backlog.js';
import { ROOT } from '../../helpers/cli.js';
import { withTempDir } from '../evals/helpers.js';

async function firstYamlBlock(file: string): Promise<string> {
  const text = await readFile(file, 'utf8');
  const block = /^```yaml\n([\s\S]*?)^```$/m.exec(text)?.[1];
  if (!block) throw new Error(`${file}: no yaml block`);
  return block;
}

describe("docs/backlogs.md's backlog runs as written", () => {
  it('at the root of a clone, its catalog, tickets and cassettes all resolve, and nothing needs a model', async () => {
    const yaml = await firstYamlBlock(join(ROOT, 'docs', 'backlogs.md'));
    await withTempDir(async (dir) => {
      // Read as `work` reads it; its names are resolved where the page says to save it.
      const file = join(dir, 'backlog.yaml');
      await writeFile(file, yaml);
      const backlog = await loadBacklog(file);
      expect(backlog.items.length).toBeGreaterThan(0);
      for (const item of backlog.items) {
        const catalogFile = resolve(ROOT, item.catalog ?? backlog.catalog ?? '');
        const catalog = await loadCatalog(catalogFile);
        const ticket = await loadTicket(item.ticket, {
          catalogDir: dirname(catalogFile),
          repoDir: catalog.repoDir,
          readStdin: () => Promise.reject(new Error('no stdin')),
          cwd: ROOT,
        });
        expect(ticket.body.length, item.id).toBeGreaterThan(0);
        expect(item.cassette, `${item.id} replays a recording`).toBeDefined();
        await loadCassette(resolve(ROOT, item.cassette ?? ''));
      }
    });
  });
});
