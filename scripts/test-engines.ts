/**
 * Extra Docker engines on this machine, for trying the fleet by hand, for the benchmark and
 * for CI debugging: the same engines the fleet tests start (tests/helpers/engines.ts), each
 * in its own network namespace, on TCP with mutual TLS. Root only.
 *
 *   npx tsx scripts/test-engines.ts start [--count N] [--image TAG]... [--owner-pid PID] [--userns-remap] [--json]
 *   npx tsx scripts/test-engines.ts stop NAME...
 *   npx tsx scripts/test-engines.ts reap        # engines whose owner process is gone
 *   npx tsx scripts/test-engines.ts list [--json]
 *
 * Engines started here belong to the calling process (the shell, by default): once it is
 * gone, the next `reap` (or any fleet test run) removes them. `--image` ships an image from
 * the local engine to each new engine. `--userns-remap` starts them with `"userns-remap":
 * "default"` (needs the dockremap user and its subordinate ids, which scripts/setup.sh adds).
 */
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import {
  ENGINE_PREFIX,
  ENGINES_ROOT,
  reapEngines,
  startEngines,
  stopEngines,
  type TestEngine,
} from '../tests/helpers/engines.js';

const USAGE = `usage:
  npx tsx scripts/test-engines.ts start [--count N] [--image TAG]... [--owner-pid PID] [--userns-remap] [--json]
  npx tsx scripts/test-engines.ts stop NAME...
  npx tsx scripts/test-engines.ts reap
  npx tsx scripts/test-engines.ts list [--json]`;

function describe(e: Pick<TestEngine, 'name' | 'url' | 'clientTlsDir' | 'socketPath' | 'logFile'>) {
  return {
    name: e.name,
    url: e.url,
    certDir: e.clientTlsDir,
    socket: e.socketPath,
    log: e.logFile,
  };
}

async function list(): Promise<Array<ReturnType<typeof describe> & { ownerPid: number | undefined }>> {
  const out = [];
  for (const name of (await readdir(ENGINES_ROOT).catch(() => [] as string[])).sort()) {
    if (!name.startsWith(ENGINE_PREFIX)) continue;
    const dir = join(ENGINES_ROOT, name);
    const owner = await readFile(join(dir, 'owner.json'), 'utf8')
      .then((t) => (JSON.parse(t) as { pid: number }).pid)
      .catch(() => undefined);
    const slot = Number(name.slice(ENGINE_PREFIX.length));
    const subnet = process.env.SANDBOX_HARNESS_TEST_ENGINE_SUBNET ?? '10.231';
    out.push({
      ...describe({
        name,
        url: `tcp://${subnet}.${slot}.2:2376`,
        clientTlsDir: join(dir, 'tls', 'client'),
        socketPath: join(dir, 'docker.sock'),
        logFile: join(dir, 'dockerd.log'),
      }),
      ownerPid: owner,
    });
  }
  return out;
}

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  const json = rest.includes('--json');
  const value = (flag: string): string[] =>
    rest.flatMap((arg, i) => (arg === flag && rest[i + 1] !== undefined ? [rest[i + 1] as string] : []));
  switch (command) {
    case 'start': {
      const count = Number(value('--count')[0] ?? '1');
      const ownerPid = Number(value('--owner-pid')[0] ?? String(process.ppid));
      if (!Number.isInteger(count) || count < 1 || count > 20) throw new Error('--count: expected 1 to 20');
      const engines = await startEngines({
        count,
        ownerPid,
        images: value('--image'),
        ...(rest.includes('--userns-remap')
          ? { daemonConfig: { 'userns-remap': 'default' }, readyTimeoutMs: 120_000 }
          : {}),
      });
      const shown = engines.map(describe);
      if (json) process.stdout.write(`${JSON.stringify(shown, null, 2)}\n`);
      else {
        for (const e of shown) {
          process.stdout.write(
            `${e.name}: DOCKER_HOST=${e.url} DOCKER_TLS_VERIFY=1 DOCKER_CERT_PATH=${e.certDir}  (log ${e.log})\n`,
          );
        }
      }
      return 0;
    }
    case 'stop': {
      const names = rest.filter((a) => !a.startsWith('--'));
      if (names.length === 0 || names.some((n) => !new RegExp(`^${ENGINE_PREFIX}\\d+$`).test(n))) {
        throw new Error(`stop: expected engine names like ${ENGINE_PREFIX}1\n${USAGE}`);
      }
      await stopEngines(names.map((name) => ({ name, dir: join(ENGINES_ROOT, name) })));
      return 0;
    }
    case 'reap': {
      const reaped = await reapEngines();
      process.stdout.write(reaped.length ? `reaped ${reaped.join(', ')}\n` : 'nothing to reap\n');
      return 0;
    }
    case 'list': {
      const engines = await list();
      if (json) process.stdout.write(`${JSON.stringify(engines, null, 2)}\n`);
      else for (const e of engines) process.stdout.write(`${e.name}  ${e.url}  owner ${e.ownerPid ?? '?'}\n`);
      return 0;
    }
    default:
      process.stderr.write(`${USAGE}\n`);
      return command === '--help' || command === '-h' ? 0 : 2;
  }
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    process.stderr.write(`test-engines: ${error instanceof Error ? error.message : String(error)}\n`);
    process.exitCode = 1;
  },
);
