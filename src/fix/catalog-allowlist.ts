/**
 * The gate's allowlist of a catalog: what `fix` checks every change set against, and what
 * `apply` checks a saved change against again (with the catalog as it is then), so both
 * refuse the same paths for the same reasons.
 */
import { catalogPathsInRepo, type LoadedCatalog } from '../catalog/load.js';
import { createAllowlist, literalGlob, type Allowlist } from '../changes/allowlist.js';

export async function catalogAllowlist(
  catalog: Pick<LoadedCatalog, 'catalog' | 'file' | 'repoDir'>,
): Promise<Allowlist> {
  const agent = catalog.catalog.agent;
  return createAllowlist({
    editable: agent.editableFiles,
    neverEditable: [
      ...(await catalogPathsInRepo(catalog)),
      // A report the agent could ship would be read as the tests' word.
      ...(agent.testReport?.path ? [literalGlob(agent.testReport.path)] : []),
    ],
    heldOut: agent.heldOutTests,
    ...(catalog.catalog.sandbox.dockerfile ? { protected: [catalog.catalog.sandbox.dockerfile] } : {}),
  });
}
