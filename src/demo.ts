/**
 * The bundled example (examples/shipping-service) as a disposable copy: the demo and the
 * end-to-end tests run `fix` on a copy, so the example itself is never modified.
 */
import { cp, mkdtemp, stat } from 'node:fs/promises';
import { spawn } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PACKAGE_ROOT } from './version.js';
import { HarnessError } from './errors.js';

export const EXAMPLE_DIR = join(PACKAGE_ROOT, 'examples', 'shipping-service');

export interface ExampleCopy {
  root: string;
  catalog: string;
  repo: string;
  cassettes: string;
  tickets: string;
}

function run(
  command: string,
  args: string[],
  cwd: string,
  output: NodeJS.WritableStream | undefined,
): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    let text = '';
    child.stdout.on('data', (d: Buffer) => ((text += d), output?.write(d)));
    child.stderr.on('data', (d: Buffer) => ((text += d), output?.write(d)));
    child.on('error', reject);
    child.on('close', (code) =>
      code === 0
        ? resolve()
        : reject(
            new HarnessError(
              'DEMO_SETUP',
              'infrastructure',
              `${command} ${args.join(' ')} failed in ${cwd}:\n${text.slice(-2000)}`,
            ),
          ),
    );
  });
}

/**
 * Copies the example into a new temporary folder and installs its dev dependencies on the
 * host (network is allowed here, never inside a sandbox; npm's cache usually has them,
 * since the harness itself depends on the same TypeScript).
 */
export async function prepareExampleCopy(
  options: { parent?: string; output?: NodeJS.WritableStream } = {},
): Promise<ExampleCopy> {
  const root = join(
    await mkdtemp(join(options.parent ?? tmpdir(), 'sandbox-harness-demo-')),
    'shipping-service',
  );
  await cp(EXAMPLE_DIR, root, {
    // Keep symlinks as they are (node_modules/.bin): resolved absolute ones would leave the repo.
    verbatimSymlinks: true,
    recursive: true,
    filter: (source) =>
      !source.includes(`${join('repo', 'node_modules')}`) && !source.includes('.sandbox-harness'),
  });
  const repo = join(root, 'repo');
  const installed = await stat(join(repo, 'node_modules', 'typescript')).then(
    () => true,
    () => false,
  );
  if (!installed) {
    await run(
      'npm',
      ['ci', '--prefer-offline', '--no-audit', '--no-fund', '--ignore-scripts'],
      repo,
      options.output,
    );
  }
  return {
    root,
    catalog: join(root, 'shipping-service.yaml'),
    repo,
    cassettes: join(root, 'cassettes'),
    tickets: join(root, 'tickets'),
  };
}
