/**
 * Viewer benchmark: page size and load time of the largest page of the offline example,
 * measured on the eval output folder the eval benchmark just produced (its `view/` export
 * is what `eval` writes itself).
 *
 * What each number means:
 *
 * - `export`: pages and bytes of `<out>/view/` as `eval` wrote them; `largest` is the
 *   biggest page (a run page: conversation, diff and test output inline).
 * - `serverGet`: the built viewer server (`dist/view/server.js`, as `sandbox-harness view`
 *   runs it) over the same folder: one HTTP GET of the largest page over loopback until the
 *   last byte, i.e. reading the run folder, rendering and sending. Also for `index.html`.
 * - `browserLoad`: Debian's Chromium (headless, driven by playwright-core) opening the
 *   largest page from the viewer's index page, as a reader clicking into a trial does,
 *   served and exported (file://): the navigation's `loadEventEnd` from the page's own
 *   Performance API (request to load event, parsing and layout of the whole page included).
 *   Skipped, with a note, when /usr/bin/chromium is missing.
 *
 * Each is a distribution over `reps` repetitions after `warmup` discarded ones.
 */
import { access, mkdtemp, readdir, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { performance } from 'node:perf_hooks';
import { pathToFileURL } from 'node:url';
import { checkInterrupted, onCleanup } from './process.mjs';
import { summarize } from './stats.mjs';

const CHROMIUM = '/usr/bin/chromium';

/** @param {string} dir */
async function pages(dir) {
  /** @type {{ path: string, bytes: number }[]} */
  const out = [];
  for (const entry of await readdir(dir, { withFileTypes: true, recursive: true })) {
    if (!entry.isFile() || !entry.name.endsWith('.html')) continue;
    const file = join(entry.parentPath ?? entry.path, entry.name);
    out.push({ path: relative(dir, file), bytes: (await stat(file)).size });
  }
  return out.sort((a, b) => b.bytes - a.bytes);
}

/**
 * @param {number} reps
 * @param {number} warmup
 * @param {() => Promise<number>} once returns one sample in ms
 */
async function sample(reps, warmup, once) {
  for (let i = 0; i < warmup; i++) await once();
  const samples = [];
  for (let i = 0; i < reps; i++) {
    checkInterrupted();
    samples.push(await once());
  }
  return summarize(samples);
}

/** @param {string} url */
async function timedGet(url) {
  const started = performance.now();
  const response = await globalThis.fetch(url);
  const body = await response.arrayBuffer();
  if (response.status !== 200) throw new Error(`GET ${url}: ${response.status}`);
  if (body.byteLength === 0) throw new Error(`GET ${url}: empty`);
  return performance.now() - started;
}

/**
 * @param {{ packageRoot: string, outDir: string, reps: number, warmup: number, log: (line: string) => void }} o
 */
export async function benchView(o) {
  const exported = await pages(join(o.outDir, 'view'));
  const largest = exported[0];
  if (!largest)
    throw new Error(`no exported viewer pages in ${join(o.outDir, 'view')}: did eval write them?`);
  const dist = (/** @type {string} */ p) => pathToFileURL(join(o.packageRoot, 'dist', 'view', p)).href;
  const { openViewSource } = await import(dist('source.js'));
  const { startViewServer } = await import(dist('server.js'));
  const server = await startViewServer(await openViewSource(o.outDir));
  const unregister = onCleanup(() => server.close());
  /** @type {Record<string, unknown>} */
  const result = {
    export: {
      pages: exported.length,
      bytes: exported.reduce((a, p) => a + p.bytes, 0),
      largest,
    },
  };
  try {
    o.log(`  viewer: largest page ${largest.path} (${largest.bytes} bytes); timing the server ...`);
    result.serverGet = {
      largest: await sample(o.reps, o.warmup, () => timedGet(`${server.url}${largest.path}`)),
      index: await sample(o.reps, o.warmup, () => timedGet(`${server.url}index.html`)),
    };
    const chromium = await access(CHROMIUM).then(
      () => true,
      () => false,
    );
    if (!chromium) {
      result.browserLoad = { skipped: `${CHROMIUM} is missing (scripts/setup.sh installs it as root)` };
      o.log(`  viewer: ${CHROMIUM} is missing; browser load times skipped`);
    } else {
      o.log('  viewer: timing the page load in headless Chromium ...');
      const file = (/** @type {string} */ p) => pathToFileURL(join(o.outDir, 'view', p)).href;
      result.browserLoad = await browserLoads(
        o,
        { index: `${server.url}index.html`, page: `${server.url}${largest.path}` },
        { index: file('index.html'), page: file(largest.path) },
      );
    }
  } finally {
    await server.close();
    unregister();
  }
  return result;
}

/**
 * @param {{ reps: number, warmup: number }} o
 * @param {{ index: string, page: string }} served URLs of the index page and the page to time
 * @param {{ index: string, page: string }} exported the same, as file:// URLs
 */
async function browserLoads(o, served, exported) {
  const { chromium } = await import('playwright-core');
  const profile = await mkdtemp(join(tmpdir(), 'bench-view-chromium-'));
  const removeProfile = () => rm(profile, { recursive: true, force: true });
  const unregister = onCleanup(removeProfile);
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-quic',
      '--no-first-run',
    ],
  });
  try {
    const page = await context.newPage();
    const load = async (/** @type {{ index: string, page: string }} */ urls) => {
      await page.goto(urls.index);
      await page.goto(urls.page, { waitUntil: 'load' });
      return page.evaluate(() => {
        const [nav] = /** @type {PerformanceNavigationTiming[]} */ (
          performance.getEntriesByType('navigation')
        );
        return nav ? nav.loadEventEnd - nav.startTime : Number.NaN;
      });
    };
    return {
      served: await sample(o.reps, o.warmup, () => load(served)),
      exported: await sample(o.reps, o.warmup, () => load(exported)),
    };
  } finally {
    await context.close();
    await removeProfile();
    unregister();
  }
}
