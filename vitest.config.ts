import { defineConfig } from 'vitest/config';
import LongestFirst from './tests/suite-sequencer.js';
import SuiteTimesReporter from './tests/suite-times-reporter.js';

/**
 * How the suite is scheduled, in three groups that run one after the other:
 *
 * 1. `unit`: no Docker (tests/unit, the in-memory conformance); every file in parallel.
 * 2. `docker`: every other test file (tests/integration, tests/e2e, tests/sandbox-conformance,
 *    any new folder): the local engine, and engines, namespaces and servers each file starts for
 *    itself under names of its own. DOCKER_WORKERS files at a time: on two cores much of a
 *    Docker file's wall time is waiting (engine and container starts, image loads, runtimes
 *    slower than runc), and files that each name their runs, images and engines do not see each
 *    other. A new Docker test file lands here without any change to this file.
 * 3. `alone`: the few files that cannot share the machine, one at a time with nothing beside
 *    them. A file belongs here only when it changes or watches something every other file
 *    relies on (listed in ALONE with the reason), never for being slow.
 *
 * Within a group the files start longest first (tests/suite-sequencer.ts), so that no long
 * file is left running alone at the end. Each file's real time lands in `.vitest-times.json`
 * (tests/suite-times-reporter.ts) for `node bench/suite-times.mjs`.
 */

/** Files that must run with no other test file beside them, and why (tests/unit/setup/suite-times.test.ts checks they exist). */
export const ALONE: Record<string, string> = {
  // The orphan reaper removes every harness container whose owning process is gone, on the first
  // create of any backend: another file starting a sandbox meanwhile would reap the orphans these
  // tests plant before they look ("reaped by this call", "not reaped before the next start-up").
  'tests/sandbox-conformance/orphans.test.ts': 'plants orphans for the reaper and checks who reaped them',
};

/** Docker files at once in the `docker` group (SANDBOX_HARNESS_TEST_DOCKER_WORKERS overrides it). */
export const DOCKER_WORKERS = workers('SANDBOX_HARNESS_TEST_DOCKER_WORKERS', 2);
/** Unit files at once (SANDBOX_HARNESS_TEST_UNIT_WORKERS overrides it). */
const UNIT_WORKERS = workers('SANDBOX_HARNESS_TEST_UNIT_WORKERS', 2);

const UNIT = ['tests/unit/**/*.test.ts', 'tests/sandbox-conformance/memory.test.ts'];
/** The `docker` group takes every test file the others do not: a file no group names would never run. */
const ALL = ['tests/**/*.test.ts'];

/** What every group shares (a project inherits nothing from the root config by itself). */
const COMMON = { testTimeout: 120_000, hookTimeout: 300_000 };

function workers(variable: string, fallback: number): number {
  const value = process.env[variable];
  if (value === undefined || value === '') return fallback;
  const count = Number(value);
  if (!Number.isInteger(count) || count < 1 || count > 16)
    throw new Error(`${variable}: expected a whole number of workers from 1 to 16, got "${value}"`);
  return count;
}

export default defineConfig({
  test: {
    ...COMMON,
    reporters: [
      'default',
      ['json', { outputFile: '.vitest-report.json' }],
      new SuiteTimesReporter('.vitest-times.json'),
    ],
    globalSetup: ['tests/global-setup.ts'],
    sequence: { sequencer: LongestFirst },
    projects: [
      {
        test: {
          ...COMMON,
          name: 'unit',
          include: UNIT,
          maxWorkers: UNIT_WORKERS,
          sequence: { groupOrder: 0 },
        },
      },
      {
        test: {
          ...COMMON,
          name: 'docker',
          include: ALL,
          exclude: [...UNIT, ...Object.keys(ALONE)],
          maxWorkers: DOCKER_WORKERS,
          sequence: { groupOrder: 1 },
        },
      },
      {
        test: {
          ...COMMON,
          name: 'alone',
          include: Object.keys(ALONE),
          maxWorkers: 1,
          sequence: { groupOrder: 2 },
        },
      },
    ],
  },
});
