import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadCatalog } from '../../../src/catalog/load.js';

describe('catalog rules', () => {
  it('may be left out: a service without business rules gets none', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'catalog-no-rules-'));
    try {
      await mkdir(path.join(dir, 'svc'));
      await writeFile(
        path.join(dir, 'min.yaml'),
        'name: svc\nowner: me\nrepo: svc\nagent:\n  editableFiles: ["src/**"]\n  testCommand: make test\n',
      );
      const { catalog } = await loadCatalog(path.join(dir, 'min.yaml'));
      expect(catalog.rules).toEqual({});
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
