import { cp, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createAllowlist, HELD_OUT_REASON } from '../../../src/changes/allowlist.js';
import { loadCatalog } from '../../../src/catalog/load.js';
import { EXAMPLE_DIR } from '../../../src/demo.js';
import { catalogAllowlist } from '../../../src/fix/catalog-allowlist.js';

describe('a change to a held-out test', () => {
  it('is refused with the held-out reason, not the catalog one', () => {
    const allowlist = createAllowlist({
      editable: ['**'],
      neverEditable: ['catalog/shipping.yaml'],
      heldOut: ['test/hidden/**'],
    });
    const verdict = allowlist.check('test/hidden/boundary.test.ts');
    expect(verdict).toEqual({ allowed: false, kind: 'never-editable', reason: HELD_OUT_REASON });
    expect(verdict.reason).not.toMatch(/catalog/);
    // Case does not get around it, as for every never-editable path.
    expect(allowlist.check('TEST/hidden/boundary.test.ts').reason).toBe(HELD_OUT_REASON);
    expect(allowlist.check('catalog/shipping.yaml').reason).toMatch(
      /the service catalog and its rules are read-only/,
    );
    expect(allowlist.check('test/visible.test.ts').allowed).toBe(true);
  });

  it('the catalog allowlist fix and apply use gives held-out tests that reason', async () => {
    const root = await mkdtemp(join(tmpdir(), 'sandbox-harness-held-out-'));
    try {
      await cp(EXAMPLE_DIR, root, { recursive: true, filter: (s) => !s.includes('node_modules') });
      const file = join(root, 'shipping-service.yaml');
      const yaml = await readFile(file, 'utf8');
      await writeFile(
        file,
        yaml
          .replace('    - src/shipping.ts', '    - src/**\n    - test/**')
          .replace(
            '  testCommand: npm test',
            '  testCommand: npm test\n  heldOutTests: [test/hidden.test.ts]',
          ),
      );
      const allowlist = await catalogAllowlist(await loadCatalog(file));
      expect(allowlist.check('test/hidden.test.ts').reason).toBe(HELD_OUT_REASON);
      expect(allowlist.check('test/shipping.test.ts').allowed).toBe(true);
    } finally {
      await rm(root, { recursive: true, force: true });
    }
  });
});
