/**
 * What `doctor` says of the agent kinds: which are ready to run now (every package of the
 * layer in the host's cache), which are installed from the npm registry on first use, and
 * which cannot run yet and why. Never a problem of the engine: a missing agent is a note.
 */
import type { DoctorCheck } from '../sandbox/types.js';
import { agentReadiness, layerPackages } from './agent-layer.js';
import { allAgentKinds } from './kind-registry.js';

export async function agentChecks(root?: string): Promise<DoctorCheck[]> {
  const checks: DoctorCheck[] = [];
  for (const kind of allAgentKinds()) {
    const name = `agent ${kind.name}`;
    if (kind.runs === 'loop') {
      checks.push({ name, ok: true, detail: 'ready (the built-in loop)' });
    } else if (kind.runs === 'unavailable') {
      checks.push({ name, ok: true, warning: true, detail: `not available: ${kind.why}` });
    } else {
      const { ready, missing } = await agentReadiness(kind, root);
      const what = layerPackages(kind)
        .map((p) => p.shown)
        .join(', ');
      checks.push(
        ready
          ? { name, ok: true, detail: `ready: ${what} in the host's cache` }
          : {
              name,
              ok: true,
              warning: true,
              detail: `not installed: ${missing.join(', ')}`,
              fix: `the first \`fix --agent ${kind.name}\` installs it from the npm registry on this host (install scripts off)`,
            },
      );
    }
  }
  return checks;
}
