/**
 * A `fix` of a copy of the bundled example with in-memory sandboxes and a scripted model:
 * a real run record on disk, in seconds, for tests of what reads records afterwards
 * (`apply`, `inspect`, `shell`, `logs`). `npm test` passes when the threshold reads 39.
 */
import { cp, mkdtemp, readFile, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import {
  runFix,
  type FixDeps,
  type FixOptions,
  type FixResult,
  type HostFileState as HostFile,
} from '../../src/fix/run-fix.js';
import { sha256 } from '../../src/changes/hash.js';
import { EXAMPLE_DIR } from '../../src/demo.js';
import type { ModelProvider } from '../../src/llm/types.js';
import { MemoryBackend, type ExecHandler, type MemorySandbox } from '../fakes/memory-sandbox.js';
import { scripted, text, toolUse, type Turn } from '../unit/agent/helpers.js';

export const fixingTurns: Turn[] = [
  {
    content: [
      toolUse('e1', 'edit_file', {
        path: 'src/shipping.ts',
        search: 'FREE_SHIPPING_THRESHOLD = 50;',
        replacement: 'FREE_SHIPPING_THRESHOLD = 39;',
      }),
    ],
  },
  { content: [text('fixed')] },
];

export const npmTest: ExecHandler = (command, _options, sandbox) => {
  if (command !== 'npm test') return { exitCode: 0 };
  return (sandbox.text('src/shipping.ts') ?? '').includes('= 39;') ? { exitCode: 0 } : { exitCode: 1 };
};

export async function listFiles(dir: string, base = dir): Promise<string[]> {
  const out: string[] = [];
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const full = join(dir, entry.name);
    if (entry.name === 'node_modules' || entry.name === '.sandbox-harness') continue;
    if (entry.isDirectory()) out.push(...(await listFiles(full, base)));
    else out.push(relative(base, full));
  }
  return out;
}

export interface MemoryRun {
  root: string;
  repo: string;
  catalog: string;
  runsDir: string;
  env: NodeJS.ProcessEnv;
  result: FixResult;
  remove(): Promise<void>;
}

/** A copy of the bundled example, and `fix` dependencies on in-memory sandboxes of its repo. */
export async function memoryExample(
  onExec: ExecHandler = npmTest,
  onCreate?: (sandbox: MemorySandbox) => void,
): Promise<{
  root: string;
  repo: string;
  catalog: string;
  env: NodeJS.ProcessEnv;
  deps: (provider: ModelProvider) => FixDeps;
}> {
  const root = await mkdtemp(join(tmpdir(), 'sandbox-harness-memory-run-'));
  await cp(EXAMPLE_DIR, root, { recursive: true, filter: (s) => !s.includes('node_modules') });
  const repo = join(root, 'repo');
  const files: Record<string, Buffer> = {};
  const hostFiles = new Map<string, HostFile>();
  for (const path of await listFiles(repo)) {
    const content = await readFile(join(repo, path));
    files[path] = content;
    hostFiles.set(path, { sha256: sha256(content), mode: 0o644, type: 'file' });
  }
  const env = { HOME: '/root', XDG_STATE_HOME: join(root, 'state') };
  const deps = (provider: ModelProvider): FixDeps => ({
    backend: new MemoryBackend(files, onExec, onCreate),
    ping: async () => undefined,
    image: async () => ({ tag: 'memory:repo', imageId: 'sha256:memory', reused: true, hostFiles }),
    createProvider: async () => provider,
  });
  return { root, repo, catalog: join(root, 'shipping-service.yaml'), env, deps };
}

export async function memoryRun(
  options: {
    turns?: Turn[];
    overrides?: Partial<FixOptions>;
    onExec?: ExecHandler;
    /** A model of the test's own (say, a real SDK against the fake model server) instead of `turns`. */
    provider?: ModelProvider;
  } = {},
): Promise<MemoryRun> {
  const { root, repo, catalog, env, deps } = await memoryExample(options.onExec);
  const fixOptions: FixOptions = {
    ticket: 'OPS-412',
    catalogFile: catalog,
    keep: 'never',
    apply: false,
    force: false,
    rebuild: false,
    cwd: root,
    env,
    signal: new AbortController().signal,
    readStdin: async () => '',
    provider: 'replay',
    ...options.overrides,
  };
  const result = await runFix(fixOptions, deps(options.provider ?? scripted(options.turns ?? fixingTurns)));
  return {
    root,
    repo,
    catalog,
    runsDir: join(repo, '.sandbox-harness', 'runs'),
    env,
    result,
    remove: () => rm(root, { recursive: true, force: true }),
  };
}
