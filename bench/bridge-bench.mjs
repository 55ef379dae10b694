/**
 * Model bridge (issue 35): the bridge's overhead per model call, and each agent CLI's start
 * time, measured by `bridge-measure.ts` (run with tsx: it drives the tests' fake model server
 * and agent-CLI helpers; the CLIs are installed from the npm registry on first use and cached)
 * and summarised here.
 *
 * - Overhead: one small non-streamed call at a time, the same client program, call by call in
 *   turn (so load drift hits both sides alike). On the host: straight to the fake model server
 *   (`direct`) against through the relay run on the host and the bridge (`localRelay`: framing,
 *   checks, metering, records). In a network-none Docker sandbox, which can reach nothing
 *   else: to a stand-in server inside it (`sandboxDirect`) against through its relay, the exec
 *   stream and the bridge to the host's server (`sandbox`). Overhead = the median difference of
 *   each pair; the goal is under 5 ms.
 * - Agent start: per CLI, from the `exec` of a one-turn task in a fresh sandbox to the first
 *   model request the server receives (`firstCall`), and to the agent's exit (`session`).
 */
import { join } from 'node:path';
import { runOk } from './process.mjs';
import { round1, summarize } from './stats.mjs';

/**
 * @param {{ packageRoot: string, reps: number, warmup: number, agentReps: number, log: (line: string) => void }} o
 */
export async function benchBridge(o) {
  o.log(
    `  ${o.reps} calls each way after ${o.warmup} warm-up(s); ${o.agentReps} session(s) per agent CLI ...`,
  );
  const { stdout } = await runOk(
    process.execPath,
    [
      '--import',
      'tsx',
      join(o.packageRoot, 'bench', 'bridge-measure.ts'),
      '--reps',
      String(o.reps),
      '--warmup',
      String(o.warmup),
      '--agent-reps',
      String(o.agentReps),
    ],
    { cwd: o.packageRoot },
  );
  const raw = JSON.parse(stdout);
  const direct = summarize(raw.calls.directMs);
  const localRelay = summarize(raw.calls.localRelayMs);
  const sandboxDirect = summarize(raw.calls.sandboxDirectMs);
  const sandbox = summarize(raw.calls.sandboxMs);
  /** @type {Record<string, { version: string, firstCall: object, session: object }>} */
  const agents = {};
  for (const [name, runs] of Object.entries(raw.agents)) {
    agents[name] = {
      version: raw.versions[name],
      firstCall: summarize(runs.map((/** @type {{ firstCallMs: number }} */ r) => r.firstCallMs)),
      session: summarize(runs.map((/** @type {{ sessionMs: number }} */ r) => r.sessionMs)),
    };
  }
  return {
    calls: {
      direct,
      localRelay,
      sandboxDirect,
      sandbox,
      overheadMs: {
        localRelay: round1(localRelay.medianMs - direct.medianMs),
        sandbox: round1(sandbox.medianMs - sandboxDirect.medianMs),
      },
      goalMs: 5,
    },
    agents,
  };
}
