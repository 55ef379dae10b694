/**
 * The Slurm lab the Slurm tests start (tests/helpers/slurm.ts), by hand: for trying Slurm
 * commands against a real cluster, for benchmarks and for CI debugging. Root only.
 *
 *   npx tsx scripts/test-slurm.ts start [--nodes N] [--cpus-per-node N] [--slurmd-timeout S] [--conf LINE]... [--no-images] [--owner-pid PID] [--json]
 *   npx tsx scripts/test-slurm.ts stop NAME...
 *   npx tsx scripts/test-slurm.ts reap        # clusters whose owner process is gone
 *
 * A cluster started here belongs to the calling process (the shell, by default): once it is
 * gone, the next `reap` (or any Slurm test run) removes it. `--conf` adds a slurm.conf line.
 */
import { reapSlurm, startSlurm, stopSlurmByName } from '../tests/helpers/slurm.js';

const USAGE = `usage:
  npx tsx scripts/test-slurm.ts start [--nodes N] [--cpus-per-node N] [--slurmd-timeout S] [--conf LINE]... [--no-images] [--owner-pid PID] [--json]
  npx tsx scripts/test-slurm.ts stop NAME...
  npx tsx scripts/test-slurm.ts reap`;

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  const values = (flag: string): string[] =>
    rest.flatMap((arg, i) => (arg === flag && rest[i + 1] !== undefined ? [rest[i + 1] as string] : []));
  switch (command) {
    case 'start': {
      const nodes = Number(values('--nodes')[0] ?? '3');
      const timeout = values('--slurmd-timeout')[0];
      const cpus = values('--cpus-per-node')[0];
      const cluster = await startSlurm({
        nodes,
        ownerPid: Number(values('--owner-pid')[0] ?? String(process.ppid)),
        extraConfig: values('--conf'),
        ...(timeout ? { slurmdTimeoutSec: Number(timeout) } : {}),
        // Fewer CPUs than the default 8 make Slurm, not the machine, cap how many sandboxes a node runs.
        ...(cpus ? { cpusPerNode: Number(cpus) } : {}),
        ...(rest.includes('--no-images') ? { images: [] } : {}),
      });
      const shown = {
        name: cluster.name,
        dir: cluster.dir,
        SLURM_CONF: cluster.confFile,
        controller: cluster.controller,
        nodes: cluster.nodes.map((n) => ({
          name: n.name,
          netns: n.netns,
          address: n.address,
          DOCKER_HOST: n.dockerHost,
          log: n.logFile,
        })),
      };
      if (rest.includes('--json')) process.stdout.write(`${JSON.stringify(shown, null, 2)}\n`);
      else {
        process.stdout.write(`${cluster.name}: export SLURM_CONF=${cluster.confFile}\n`);
        for (const n of shown.nodes) {
          process.stdout.write(
            `  ${n.name}: netns ${n.netns}, DOCKER_HOST=${n.DOCKER_HOST} (log ${n.log})\n`,
          );
        }
      }
      return 0;
    }
    case 'stop': {
      const names = rest.filter((a) => !a.startsWith('--'));
      if (names.length === 0) throw new Error(`stop: expected cluster names\n${USAGE}`);
      for (const name of names) await stopSlurmByName(name);
      return 0;
    }
    case 'reap': {
      const reaped = await reapSlurm();
      process.stdout.write(reaped.length ? `reaped ${reaped.join(', ')}\n` : 'nothing to reap\n');
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
    process.stderr.write(`test-slurm: ${error instanceof Error ? error.message : String(error)}\n`);
    process.exitCode = 1;
  },
);
