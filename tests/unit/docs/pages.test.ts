/**
 * The docs without an engine: every page's blocks and directives are well-formed, every
 * command that is not run still parses against the program, every link leads somewhere, and
 * no instruction would change the machine's main engine. tests/e2e/docs.test.ts runs the
 * commands; this file keeps a page from rotting between those runs.
 */
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  linkProblems,
  machineSafetyProblems,
  pageProblems,
  harnessParseProblem,
} from '../../helpers/doc-checks.js';
import {
  docPagePaths,
  harnessArgs,
  parseDocPage,
  readDocPages,
  roleOf,
  scanShell,
  simpleCommands,
  SHELL_LANGS,
  type DocPage,
} from '../../helpers/doc-pages.js';
import { ROOT } from '../../helpers/cli.js';

const pages = await readDocPages(ROOT);

describe('the docs pages', () => {
  it('are the README and every .md under docs/', () => {
    expect(pages[0]!.path).toBe('README.md');
    expect(pages.length).toBeGreaterThan(10);
  });

  it('any .md under docs/ is a page, in a subfolder too, with nothing to register', async () => {
    const root = await mkdtemp(join(tmpdir(), 'doc-pages-'));
    try {
      await mkdir(join(root, 'docs', 'backends'), { recursive: true });
      for (const file of ['README.md', 'docs/b.md', 'docs/a.md', 'docs/backends/slurm.md', 'docs/notes.txt'])
        await writeFile(join(root, file), '# page\n');
      expect(await docPagePaths(root)).toEqual([
        'README.md',
        'docs/a.md',
        'docs/b.md',
        'docs/backends/slurm.md',
      ]);
    } finally {
      await rm(root, { recursive: true, force: true });
    }
  });

  it.each(pages.map((p) => [p.path, p] as const))(
    '%s: blocks, directives and every command that is not run parse',
    async (_path, page) => {
      expect(await pageProblems(ROOT, page)).toEqual([]);
    },
    60_000,
  );

  it.each(pages.map((p) => [p.path, p] as const))(
    '%s: every relative link leads to a file and heading',
    (_path, page) => {
      expect(linkProblems(ROOT, page)).toEqual([]);
    },
  );

  it.each(pages.map((p) => [p.path, p] as const))(
    '%s: no instruction changes the main engine',
    (_path, page) => {
      expect(page.blocks.flatMap(machineSafetyProblems)).toEqual([]);
    },
  );

  it('the README states the test command CI runs: a command line of .ci/run, as written', async () => {
    // One line to change when the suite's command changes: the README's, then .ci/run's.
    const block = pages[0]!.blocks.find((b) => b.runBy === '.ci/run');
    const command = block?.commands[0] && scanShell(block.commands[0].text).code;
    expect(command).toBeTruthy();
    const ci = (await readFile(join(ROOT, '.ci', 'run'), 'utf8'))
      .split('\n')
      .map((line) => scanShell(line).code.trim())
      .filter(Boolean);
    expect(ci).toContain(command);
  });

  it('the README is a guide: short, one test command (CI runs it), its tour run', () => {
    const readme = pages[0]!;
    expect(readme.text.split('\n').length).toBeLessThan(200);
    const shell = readme.blocks.filter((b) => SHELL_LANGS.has(b.lang));
    expect(shell.filter((b) => b.runBy === '.ci/run').map((b) => b.commands.length)).toEqual([1]);
    const tour = shell.find((b) => b.section === 'A ten-minute tour');
    expect(tour && roleOf(tour)).toBe('run');
    for (const command of [
      'fix',
      'runs',
      'inspect',
      'logs',
      'view',
      'shell',
      'rerun-tests',
      'gc',
      'check',
      'exec',
      'eval',
    ])
      expect(
        tour!.commands.some(
          (c) =>
            c.text.startsWith(`sandbox-harness ${command} `) ||
            c.text.startsWith(`sandbox-harness ${command}\t`) ||
            c.text.split(/\s+/)[1] === command,
        ),
        command,
      ).toBe(true);
  });

  it('every page has a title and is linked from the README', () => {
    const readme = pages[0]!.text;
    for (const page of pages.slice(1)) {
      expect(page.text.startsWith('# '), `${page.path} starts with its title`).toBe(true);
      expect(readme, `README.md links ${page.path}`).toContain(`](${page.path})`);
    }
  });
});

describe('the checks can fail', () => {
  const page = (text: string): DocPage => parseDocPage('docs/example.md', text);

  it('an unknown need, a directive before nothing, a prompt, a heredoc and a console block are problems', () => {
    const problems = page(
      [
        '# T',
        '<!-- doc-test: needs a-laptop -->',
        '```bash',
        'sandbox-harness doctor',
        '```',
        '<!-- doc-test: needs root -->',
        'some text',
        '```bash',
        '$ sandbox-harness doctor',
        'cat <<EOF',
        '```',
        '```console',
        'x',
        '```',
      ].join('\n'),
    ).problems.join('\n');
    expect(problems).toMatch(/:2: unknown need "a-laptop"/);
    expect(problems).toMatch(/:6: a doc-test directive must come right before a fenced block/);
    expect(problems).toMatch(/:9: a command with a prompt/);
    expect(problems).toMatch(/:10: a heredoc/);
    expect(problems).toMatch(/:12: write commands in a ```bash block/);
  });

  it('a command that is not run must still parse: an unknown subcommand, flag or bad value is a problem', async () => {
    expect(await harnessParseProblem(['fix', 'OPS-412', '--cassette', 'x.json'])).toBeUndefined();
    expect(await harnessParseProblem(['fix', 'OPS-412', '--casette', 'x.json'])).toMatch(
      /unknown option '--casette'/,
    );
    expect(await harnessParseProblem(['fix', 'OPS-412', '--max-attempts', '0'])).toMatch(/--max-attempts/);
    expect(await harnessParseProblem(['fixx', 'OPS-412'])).toMatch(/unknown command 'fixx'/);
    expect(await harnessParseProblem(['inspect'])).toMatch(/missing required argument/);
    expect(await harnessParseProblem(['catalog', 'validate', 'a.yaml'])).toBeUndefined();
    const marked = page(
      [
        '# T',
        '<!-- doc-test: needs live-model -->',
        '```bash',
        'DOCKER_HOST=unix:///x.sock sandbox-harness fix OPS-412 --provider anthropc \\',
        '  --no-apply',
        '```',
      ].join('\n'),
    );
    const problems = (await pageProblems(ROOT, marked)).join('\n');
    expect(problems).toMatch(/docs\/example\.md:4: [\s\S]* does not parse: [\s\S]*anthropc/);
    // ... and it has no offline equivalent beside it.
    expect(problems).toMatch(/:3: a block that needs live-model has its offline equivalent beside it/);
  });

  it('a command is found behind env assignments, sudo, node dist/main.js; pipes and redirections split', () => {
    expect(simpleCommands('A=1 sudo sandbox-harness gc --run last 2>&1 | tail -3 > out.txt')).toEqual([
      ['A=1', 'sudo', 'sandbox-harness', 'gc', '--run', 'last'],
      ['tail', '-3'],
    ]);
    expect(harnessArgs(['A=1', 'sudo', 'sandbox-harness', 'gc', '--run', 'last'])).toEqual([
      'gc',
      '--run',
      'last',
    ]);
    expect(harnessArgs(['node', 'dist/main.js', 'doctor'])).toEqual(['doctor']);
    expect(harnessArgs(['npm', 'test'])).toBeUndefined();
  });

  it('an expected exit code is read from the comment, and a file block from its first line', () => {
    const p = page(
      [
        '# T',
        '```yaml',
        '# catalog/x.yaml',
        'name: x',
        '```',
        '```yaml',
        '# yaml-language-server: $schema=schema.json',
        '```',
        '```bash',
        "echo '# not a comment' # exit 3: because",
        'sandbox-harness gc --run last   # removes them',
        '```',
      ].join('\n'),
    );
    expect(p.problems).toEqual([]);
    expect(p.blocks.map((b) => b.file)).toEqual(['catalog/x.yaml', undefined, undefined]);
    expect(p.blocks[2]!.commands.map((c) => [c.line, c.expectExit])).toEqual([
      [10, 3],
      [11, 0],
    ]);
  });

  it('links to a missing page or heading are problems', () => {
    const problems = linkProblems(
      ROOT,
      page(
        '# T\n\nSee [a](missing.md), [b](outcomes.md#no-such-heading), [c](outcomes.md#exit-codes), [d](#t), [e](#u).\n',
      ),
    );
    expect(problems).toEqual([
      'docs/example.md:3: link to missing.md: no such file',
      'docs/example.md:3: link to outcomes.md#no-such-heading: docs/outcomes.md has no heading #no-such-heading',
      'docs/example.md:3: link to #u: no heading #u on this page',
    ]);
  });

  it("the user-namespace recipe the README had (a dockerd in the host's network namespace with --bridge none) is refused", () => {
    const old = page(
      [
        '# T',
        '```bash',
        'dockerd --config-file /etc/docker/userns.json --userns-remap=default \\',
        '  --data-root /var/lib/docker-userns --exec-root /run/docker-userns --pidfile /run/docker-userns.pid --cgroup-parent docker-userns \\',
        '  -H unix:///run/docker-userns.sock --bridge none --iptables=false >/var/log/docker-userns.log 2>&1 &',
        'podman --runtime runc system service --time=0 unix:///run/podman/podman.sock &',
        'dockerd --data-root /var/lib/docker &',
        'echo x > /etc/docker/daemon.json',
        '```',
      ].join('\n'),
    );
    const problems = old.blocks.flatMap(machineSafetyProblems).join('\n');
    expect(problems).toMatch(
      /:3: a second dockerd in the host's network namespace with --bridge none deletes the host's docker0/,
    );
    expect(problems).toMatch(/:6: a Podman service on the default socket/);
    expect(problems).toMatch(
      /:7: a second dockerd in the host's network namespace takes over the host's docker0/,
    );
    expect(problems).toMatch(/:7: a second dockerd needs its own --data-root/);
    expect(problems).toMatch(/:7: a second dockerd needs its own -H unix:/);
    expect(problems).toMatch(/:8: writes the main engine's daemon.json/);
    const fixed = page(
      [
        '# T',
        '```bash',
        'nsenter --net=/run/netns/x dockerd --config-file /etc/x/daemon.json --data-root /var/lib/x --exec-root /run/x --pidfile /run/x.pid -H unix:///run/x.sock --bridge none &',
        '```',
      ].join('\n'),
    );
    expect(fixed.blocks.flatMap(machineSafetyProblems)).toEqual([]);
  });
});

describe('every sandbox-harness command of the docs', () => {
  it('is found (so the parse checks above see them)', () => {
    const commands = pages.flatMap((p) =>
      p.blocks.flatMap((b) =>
        b.commands.flatMap((c) => simpleCommands(c.text).filter((w) => harnessArgs(w))),
      ),
    );
    expect(commands.length).toBeGreaterThan(40);
  });
});
