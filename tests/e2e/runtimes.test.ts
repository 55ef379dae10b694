/**
 * The bundled example reaches the same outcomes behind every wall (issue 24): `eval` (one
 * trial of the suite's task that fixes the ticket) and `fix` (the demo cassette) under runc, gVisor (`--runtime runsc`) on the local engine, rootful
 * Podman's API service and a second dockerd with userns-remap, each reached the way a user
 * reaches it (`--runtime`, `DOCKER_HOST`). The built CLI, real engines, replayed model. Each
 * engine builds the example's image itself from the shipped base image, offline.
 *
 * The same verdicts everywhere: the trial passes, scored and recorded under the runtime that
 * ran it; fix is ready-for-review with the change
 * written back to the host, owned by the user who ran the harness (not by a remapped id).
 *
 * The four sides run one after the other: they share two cores with the rest of the suite,
 * and the time limits inside a run (test commands, trials) are not made to be shared. One
 * trial and one fix per side keep the file as cheap as it can be.
 */
import { cp, readFile, stat, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_BASE_IMAGE } from '../../src/sandbox/docker/images/base-images.js';
import { ensureBaseImage } from '../../src/sandbox/docker/images/ensure-base.js';
import { dockerEngine } from '../../src/sandbox/docker/engine/index.js';
import { exampleCopy, removeExampleCopies } from '../helpers/example.js';
import { cleanEnv, runCli, ROOT } from '../helpers/cli.js';
import { PODMAN_SOCKET, podmanEngine, shipToPodman, stopPodman } from '../helpers/podman.js';
import { sharedUsernsEngine, type UsernsEngine } from '../helpers/userns.js';

interface Side {
  name: string;
  /** The runtime the run records say ran the sandboxes. */
  runtime: string;
  args: string[];
  env: () => NodeJS.ProcessEnv;
}

let userns: UsernsEngine | undefined;
let releaseUserns: (() => Promise<void>) | undefined;

const SIDES: Side[] = [
  { name: 'runc', runtime: 'runc', args: [], env: () => cleanEnv() },
  { name: 'runsc', runtime: 'runsc', args: ['--runtime', 'runsc'], env: () => cleanEnv() },
  // Podman runs every container under its service's runtime (runc here, scripts/setup.sh).
  {
    name: 'podman',
    runtime: 'runc',
    args: [],
    env: () => cleanEnv({ DOCKER_HOST: `unix://${PODMAN_SOCKET}` }),
  },
  {
    name: 'userns-remap',
    runtime: 'runc',
    args: [],
    env: () => {
      if (!userns) throw new Error('the userns-remap engine did not start');
      return cleanEnv({ DOCKER_HOST: `unix://${userns.engine.socketPath}` });
    },
  },
];

interface Result {
  taskId: string;
  outcome: string;
  category: string;
  runtime?: string;
}

interface FixJson {
  outcome: string;
  applied: boolean;
  runDir: string;
}

describe(
  'the example behind every wall: runc, runsc, Podman, userns-remap (real engines)',
  { timeout: 900_000 },
  () => {
    beforeAll(async () => {
      await dockerEngine().ping(5000);
      await ensureBaseImage('node', {});
      await shipToPodman(await podmanEngine(), [DEFAULT_BASE_IMAGE]);
      // The run's userns-remap engine (shared with the conformance run on it).
      ({ userns, release: releaseUserns } = await sharedUsernsEngine([DEFAULT_BASE_IMAGE]));
    }, 900_000);

    afterAll(async () => {
      await releaseUserns?.();
      userns = undefined;
      stopPodman();
      await removeExampleCopies();
    });

    it('doctor says user namespaces are on for the userns-remap engine', async () => {
      const socket = `unix://${userns!.engine.socketPath}`;
      const r = await runCli(['doctor', '--engine', socket, '--json'], { env: cleanEnv() });
      const report = JSON.parse(r.stdout) as { engines: { checks: { name: string; detail: string }[] }[] };
      const check = report.engines[0]?.checks.find((c) => c.name === 'userns');
      expect(check?.detail, r.stdout).toMatch(/^user namespaces on/);
    });

    for (const side of SIDES) {
      it(`${side.name}: the eval trial passes; fix is ready-for-review and applied`, async () => {
        const copy = await exampleCopy();
        const root = dirname(copy.root);
        await cp(join(ROOT, 'examples', 'evals'), join(root, 'evals'), { recursive: true });
        const suite = join(root, 'evals', 'walls.yaml');
        await writeFile(
          suite,
          [
            'name: walls',
            'defaults:',
            '  n: 1',
            '  concurrency: 1',
            '  keep: never',
            'tasks:',
            '  - id: fixes-threshold',
            '    catalog: shipping-eval.yaml',
            '    ticket: ../shipping-service/tickets/OPS-412.md',
            '    cassette: cassettes/fixes.json',
            '',
          ].join('\n'),
        );
        const out = join(root, 'out');
        // The eval first: it leaves the host repo as it was, for the fix after it.
        const evaluated = await runCli(['eval', suite, '--out', out, '--json', ...side.args], {
          cwd: root,
          env: side.env(),
        });
        // 0: every trial scored.
        expect(evaluated.code, evaluated.stderr).toBe(0);
        const results = (await readFile(join(out, 'results.jsonl'), 'utf8'))
          .split('\n')
          .filter(Boolean)
          .map((l) => JSON.parse(l) as Result);
        expect(results.map((r) => [r.taskId, r.outcome, r.category, r.runtime])).toEqual([
          ['fixes-threshold', 'passed', 'ready-for-review', side.runtime],
        ]);

        const fixed = await runCli(
          [
            'fix',
            'OPS-412',
            '--catalog',
            copy.catalog,
            '--cassette',
            join(copy.cassettes, 'OPS-412.json'),
            '--keep',
            'never',
            '--json',
            ...side.args,
          ],
          { cwd: copy.root, env: side.env() },
        );
        expect(fixed.code, fixed.stderr).toBe(0);
        const json = JSON.parse(fixed.stdout) as FixJson;
        expect(json).toMatchObject({ outcome: 'ready-for-review', applied: true });
        const record = JSON.parse(await readFile(join(json.runDir, 'run.json'), 'utf8')) as {
          runtime?: string;
        };
        expect(record.runtime).toBe(side.runtime);
        const changed = join(copy.repo, 'src', 'shipping.ts');
        expect(await readFile(changed, 'utf8')).toMatch(/FREE_SHIPPING_THRESHOLD = 39;/);
        // Written back by the host process, never with the sandbox's (possibly remapped) ids.
        const owner = await stat(changed);
        expect([owner.uid, owner.gid]).toEqual([process.getuid?.(), process.getgid?.()]);
      });
    }
  },
);
