/**
 * Writes `.vitest-times.json`: how long each test file really took, from the moment a worker
 * took it to its end (import, `beforeAll`/`afterAll` hooks and all), and the run's wall time.
 * The JSON report (`.vitest-report.json`) only has per-test durations: a file whose minute
 * goes into building an image in `beforeAll` shows there as a few seconds. `bench/suite-times.mjs`
 * reads both and writes the per-file table into the bench results.
 */
import { writeFileSync, renameSync } from 'node:fs';
import { availableParallelism, loadavg } from 'node:os';
import { relative } from 'node:path';
import type { Reporter, TestModule, TestRunEndReason } from 'vitest/node';

export interface FileTime {
  file: string;
  project: string;
  /** Epoch ms at which a worker took the file, and at which it ended. */
  queuedAt: number;
  endedAt: number;
  wallMs: number;
  /** Importing the file and collecting its tests (part of wallMs). */
  collectMs: number;
  tests: number;
  state: string;
}

export interface SuiteTimes {
  version: 1;
  startedAt: string;
  finishedAt: string;
  wallMs: number;
  state: TestRunEndReason;
  /** How busy the machine was: its CPUs, and the 1-minute load average at the start and the end. */
  machine: { cpus: number; loadAtStart: number; loadAtEnd: number };
  files: FileTime[];
}

export default class SuiteTimesReporter implements Reporter {
  private readonly queued = new Map<string, number>();
  private readonly ended = new Map<string, number>();
  private started = Date.now();
  private loadAtStart = loadavg()[0] ?? 0;
  private root = process.cwd();

  constructor(private readonly outputFile = '.vitest-times.json') {}

  onInit(vitest: { config: { root: string } }): void {
    this.root = vitest.config.root;
  }

  onTestRunStart(): void {
    this.started = Date.now();
    this.loadAtStart = loadavg()[0] ?? 0;
  }

  onTestModuleQueued(module: TestModule): void {
    this.queued.set(module.id, Date.now());
  }

  onTestModuleEnd(module: TestModule): void {
    this.ended.set(module.id, Date.now());
  }

  onTestRunEnd(modules: ReadonlyArray<TestModule>, _errors: unknown, state: TestRunEndReason): void {
    const finished = Date.now();
    const files = modules.map((module): FileTime => {
      const diagnostic = module.diagnostic();
      const endedAt = this.ended.get(module.id) ?? finished;
      const queuedAt = this.queued.get(module.id) ?? endedAt;
      return {
        file: relative(this.root, module.moduleId),
        project: module.project.name,
        queuedAt,
        endedAt,
        wallMs: endedAt - queuedAt,
        collectMs: Math.round(diagnostic.collectDuration),
        tests: [...module.children.allTests()].length,
        state: module.state(),
      };
    });
    const times: SuiteTimes = {
      version: 1,
      startedAt: new Date(this.started).toISOString(),
      finishedAt: new Date(finished).toISOString(),
      wallMs: finished - this.started,
      state,
      machine: { cpus: availableParallelism(), loadAtStart: this.loadAtStart, loadAtEnd: loadavg()[0] ?? 0 },
      files,
    };
    const temp = `${this.outputFile}.${process.pid}.tmp`;
    writeFileSync(temp, `${JSON.stringify(times, null, 2)}\n`);
    renameSync(temp, this.outputFile);
  }
}
