/**
 * The change path on a 20,000-file workspace (issue 12): what it costs to learn what an
 * attempt changed, to read it back, and to check a verification sandbox, as the change
 * grows while the workspace stays the same. Warm-ups run first and are discarded.
 *
 * The harness scans a sandbox once, when the attempt (or the verification's write) is done,
 * so every scan timed here is the first one of a fresh sandbox of the image `many-files.mjs`
 * builds, made to the state it measures by an `exec` that is not timed. One repetition
 * runs these steps, starting at a different one each time:
 *
 * - `freeze` and `changes.none`: a command over the command channel leaves a background
 *   process behind (as agents do), `sandbox.freeze()` stops every process (diagnostic), then
 *   `sandbox.changes()` with nothing changed.
 * - `baseImageNone`: `sandbox.changes()` on a sandbox of the base image, whose workspace is
 *   empty: the scan without the 20,000 files (same cost = the image's size does not count).
 * - `changes.one`: one file changed, `sandbox.changes()`: the scan inside the sandbox
 *   against its start marker, plus the host's pristine tree (cached per image, warmed before
 *   timing), turned into changes. Then, on the same sandbox, `engineDiff` (diagnostic):
 *   `DockerEngine.containerChanges`, the daemon's own diff, which the hot path no longer uses.
 * - `archivePull`: one file changed, `DockerEngine.containers.getArchive('/workspace')` with every byte
 *   drained: what a harness without a change list would have to read (its own sandbox, so
 *   it reads a workspace as cold as the scan does).
 * - `changes.hundred`, `changes.thousand`: 100 and 1,000 files changed, spread over all 400
 *   folders; after the 1,000, `exportThousand`: `sandbox.exportFiles()` of those paths, one
 *   stream.
 * - `writeOne` and `invariantOne`: a fresh verification sandbox; the allowed change (1 file)
 *   written as `verify` does (diagnostic), then `checkInvariant` of `dist/fix/verify.js`: the
 *   check that the sandbox holds exactly the allowed change (its scan, export and hashing;
 *   diagnostic).
 *
 * Before that, `tree`: the image's pristine tree read cold by a new backend instance per
 * repetition (`DockerBackend.workspaceTree`): the cost a process pays once per image.
 *
 * Every answer is checked (exactly the changed paths, every exported byte, an empty
 * invariant report); `checks` in the JSON says whether every repetition was right.
 */
import { performance } from 'node:perf_hooks';
import { ratio, summarize } from './stats.mjs';
import { CHANGED_FILE, FILE_COUNT, manyFilesImage, spreadFiles } from './many-files.mjs';
import { createTracked, execOk, repeat, rotate } from './sandbox-helpers.mjs';

/** The content every changed file ends with; the export check looks for it. */
const CHANGE_LINE = 'changed by the bench\n';

/**
 * @param {readonly string[]} paths
 */
const changeCommand = (paths) =>
  `for f in ${paths.join(' ')}; do echo '${CHANGE_LINE.trimEnd()}' >> "$f" || exit 1; done`;

/**
 * Whether a scan reported exactly `expected` (all modified regular files) and was complete.
 *
 * @param {{ changes: Array<{ path: string, kind: string, type?: string }>, complete: boolean }} scan
 * @param {ReadonlySet<string>} expected
 */
function exactly(scan, expected) {
  return (
    scan.complete &&
    scan.changes.length === expected.size &&
    scan.changes.every((c) => expected.has(c.path) && c.kind === 'modified' && c.type === 'file')
  );
}

/**
 * Times `fn` and keeps the sample when `keep`.
 *
 * @template T
 * @param {number[]} samples
 * @param {boolean} keep
 * @param {() => Promise<T>} fn
 * @returns {Promise<T>}
 */
async function timed(samples, keep, fn) {
  const t0 = performance.now();
  const result = await fn();
  if (keep) samples.push(performance.now() - t0);
  return result;
}

/**
 * @param {{
 *   backend: import('./sandbox-helpers.mjs').BenchBackend,
 *   engine: import('./sandbox-helpers.mjs').BenchEngine,
 *   newBackend: () => import('./sandbox-helpers.mjs').BenchBackend,
 *   buildRepoImage: Parameters<typeof manyFilesImage>[0]['buildRepoImage'],
 *   checkInvariant: (box: object, changeSet: object, tree: ReadonlyMap<string, unknown>) => Promise<{ differences: string[] }>,
 *   hostMode: (mode: number) => number,
 *   baseImage: string,
 *   reps: number,
 *   warmup: number,
 *   log: (line: string) => void,
 * }} o
 */
export async function benchChanges(o) {
  const image = await manyFilesImage({ buildRepoImage: o.buildRepoImage, log: o.log });
  const sets = { one: spreadFiles(1), hundred: spreadFiles(100), thousand: spreadFiles(1000) };
  const expected = {
    none: new Set(),
    one: new Set(sets.one),
    hundred: new Set(sets.hundred),
    thousand: new Set(sets.thousand),
  };

  // The one-time cost: the pristine tree read by a backend that has not read it yet.
  /** @type {number[]} */ const treeMs = [];
  let treeEntries = 0;
  await repeat({ ...o, label: 'pristine tree of the 20k-file image, cold' }, async (_i, keep) => {
    const tree = await timed(treeMs, keep, () => o.newBackend().workspaceTree(image.tag));
    treeEntries = tree.size;
  });
  // The sandboxes below share the bench's backend, whose cache now holds both trees.
  const tree = await o.backend.workspaceTree(image.tag);
  await o.backend.workspaceTree(o.baseImage);

  /** @type {Record<string, number[]>} */
  const s = {
    freeze: [],
    none: [],
    baseImage: [],
    one: [],
    archivePull: [],
    engineDiff: [],
    hundred: [],
    thousand: [],
    exportThousand: [],
    writeOne: [],
    invariantOne: [],
  };
  const checks = {
    none: true,
    baseImage: true,
    one: true,
    hundred: true,
    thousand: true,
    exportThousand: true,
    invariantOne: true,
    engineDiffListsTheChange: true,
  };
  let archiveBytes = 0;
  /** @type {unknown} */ let lastOne;
  /** @type {string[]} */ let lastInvariantDifferences = [];

  /**
   * A fresh sandbox of `imageTag` for one step, removed afterwards whatever happens.
   *
   * @param {string} imageTag
   * @param {(box: import('./sandbox-helpers.mjs').BenchSandbox) => Promise<void>} work
   */
  const inFresh = async (imageTag, work) => {
    const { sandbox: box, dispose } = await createTracked(o.backend, imageTag);
    try {
      await work(box);
    } finally {
      await dispose();
    }
  };
  /**
   * A fresh sandbox of the 20k-file image with `paths` changed (not timed), then its first
   * scan (as an attempt does once), checked against exactly those paths.
   *
   * @param {readonly string[]} paths
   * @param {number[]} samples
   * @param {'one' | 'hundred' | 'thousand'} check
   * @param {boolean} keep
   * @param {(box: import('./sandbox-helpers.mjs').BenchSandbox) => Promise<void>} [after] more work on the same sandbox
   */
  const scanAfterChanging = (paths, samples, check, keep, after) =>
    inFresh(image.tag, async (box) => {
      await execOk(box, changeCommand(paths));
      const scan = await timed(samples, keep, () => box.changes());
      if (check === 'one') lastOne = scan;
      if (!exactly(scan, expected[check])) checks[check] = false;
      await after?.(box);
    });

  await repeat({ ...o, label: 'change path on the 20k-file image' }, (i, keep) =>
    rotate(i, [
      // As an attempt ends: an agent's command left a process behind, the freeze stops it,
      // then the one scan, here with nothing changed.
      () =>
        inFresh(image.tag, async (box) => {
          await execOk(box, 'sleep 600 >/dev/null 2>&1 &', { fast: true });
          await timed(s.freeze, keep, () => box.freeze());
          const scan = await timed(s.none, keep, () => box.changes());
          if (!exactly(scan, expected.none)) checks.none = false;
        }),
      // The same on an empty workspace: what the scan costs without the 20,000 files.
      () =>
        inFresh(o.baseImage, async (box) => {
          const scan = await timed(s.baseImage, keep, () => box.changes());
          if (!exactly(scan, expected.none)) checks.baseImage = false;
        }),
      () =>
        scanAfterChanging(sets.one, s.one, 'one', keep, async (box) => {
          // The daemon computes its diff on the host side; the scan before it does not make it cheaper.
          const diff = await timed(s.engineDiff, keep, () => o.engine.containers.changes(box.id));
          if (!diff.some((c) => c.path === `/workspace/${CHANGED_FILE}`))
            checks.engineDiffListsTheChange = false;
        }),
      // The alternative to the scan, on its own fresh sandbox so it too reads a cold workspace.
      () =>
        inFresh(image.tag, async (box) => {
          await execOk(box, changeCommand(sets.one));
          await timed(s.archivePull, keep, async () => {
            const stream = await o.engine.containers.getArchive(box.id, '/workspace');
            if (!stream) throw new Error('getArchive(/workspace) found nothing');
            let bytes = 0;
            for await (const chunk of stream) bytes += chunk.length;
            archiveBytes = bytes;
          });
        }),
      () => scanAfterChanging(sets.hundred, s.hundred, 'hundred', keep),
      () =>
        scanAfterChanging(sets.thousand, s.thousand, 'thousand', keep, async (box) => {
          const exported = await timed(s.exportThousand, keep, () => box.exportFiles(sets.thousand));
          const right =
            exported.refused.length === 0 &&
            exported.files.length === sets.thousand.length &&
            exported.files.every(
              (f) => expected.thousand.has(f.path) && f.content.toString('utf8').endsWith(CHANGE_LINE),
            );
          if (!right) checks.exportThousand = false;
        }),
      // The verification side: a fresh sandbox, the allowed change written, the invariant.
      () =>
        inFresh(image.tag, async (box) => {
          const content = Buffer.from(`${CHANGED_FILE}: ${CHANGE_LINE}`);
          const mode = o.hostMode(0o644);
          const changeSet = {
            entries: [
              {
                path: CHANGED_FILE,
                kind: 'modified',
                type: 'file',
                content,
                mode,
                binary: false,
                modeChanged: false,
                allowed: true,
              },
            ],
            ignored: [],
            unchanged: [],
            editable: [],
            limits: {},
          };
          await timed(s.writeOne, keep, () =>
            box.writeFiles([{ path: CHANGED_FILE, content, mode: mode & 0o777 }]),
          );
          const report = await timed(s.invariantOne, keep, () => o.checkInvariant(box, changeSet, tree));
          if (report.differences.length > 0) {
            checks.invariantOne = false;
            lastInvariantDifferences = report.differences.slice(0, 5);
          }
        }),
    ]),
  );

  const sum = Object.fromEntries(Object.entries(s).map(([k, v]) => [k, summarize(v)]));
  return {
    image: {
      tag: image.tag,
      reused: image.reused,
      workspaceEntries: treeEntries,
      workspaceFiles: image.files,
      generatedFiles: FILE_COUNT,
      buildOrReuseMs: Math.round(image.buildOrReuseMs),
    },
    changedFile: CHANGED_FILE,
    lastOneChangeScan: lastOne,
    checks,
    ...(lastInvariantDifferences.length ? { invariantDifferences: lastInvariantDifferences } : {}),
    tree: summarize(treeMs),
    freeze: sum.freeze,
    changes: { none: sum.none, one: sum.one, hundred: sum.hundred, thousand: sum.thousand },
    baseImageNone: sum.baseImage,
    archivePull: sum.archivePull,
    archiveBytes,
    engineDiff: sum.engineDiff,
    // How many times the archive pull takes as long as the scan of one changed file (target >= 10).
    archiveToChanges: ratio(sum.archivePull, sum.one),
    exportThousand: sum.exportThousand,
    writeOne: sum.writeOne,
    invariantOne: sum.invariantOne,
  };
}
