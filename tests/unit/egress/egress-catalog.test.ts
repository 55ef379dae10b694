/**
 * The catalog's `sandbox.egress`: host patterns, deny rules with exceptions, private ranges,
 * phases, with file:line:col errors; and which sandbox of a run gets which policy.
 */
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { loadCatalog } from '../../../src/catalog/load.js';
import { ConfigError } from '../../../src/errors.js';
import { buildEgress, egressForRole, phaseOfRole } from '../../../src/fix/egress-phases.js';
import { catalogImageOptions } from '../../../src/fix/deps.js';
import { rejection } from '../../helpers/rejection.js';
import { catalogSpec, egressNote } from '../../../src/cli/commands/exec.js';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'catalog-egress-'));
  await mkdir(path.join(dir, 'repo'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

// Line 10 is `sandbox:`; the section's own lines start at 11.
const catalog = (sandbox: string) => `name: svc
owner: team
repo: repo
rules: {}
agent:
  editableFiles:
    - src/**/*.js
  testCommand: npm test

sandbox:
${sandbox}
`;

async function load(sandbox: string) {
  await writeFile(path.join(dir, 'catalog.yaml'), catalog(sandbox));
  return loadCatalog('catalog.yaml', { cwd: dir });
}
const problems = async (sandbox: string) => (await rejection(load(sandbox), ConfigError)).problems;

describe('catalog sandbox.egress', () => {
  it('is absent by default: no sandbox of the run gets any network', async () => {
    const loaded = await load('  timeouts: {commandSec: 10}');
    expect(loaded.catalog.sandbox.egress).toBeUndefined();
    for (const role of ['attempt-1', 'baseline', 'verify-1', 'review-1']) {
      expect(egressForRole(loaded.catalog.sandbox.egress, role)).toBeUndefined();
    }
  });

  it('gives the agent egress; the baseline and the verification only when their phase is listed', async () => {
    const egress = (await load('  egress:\n    allow: [registry.npmjs.org]')).catalog.sandbox.egress;
    expect(egressForRole(egress, 'attempt-2')).toMatchObject({
      allow: [{ host: 'registry.npmjs.org', ports: [443, 80] }],
    });
    expect(egressForRole(egress, 'baseline')).toBeUndefined();
    expect(egressForRole(egress, 'verify-2')).toBeUndefined();
    expect(egressForRole(egress, 'verify-2-visible')).toBeUndefined();
    expect(egressForRole(egress, 'review-1')).toBeUndefined();
    const all = (await load('  egress:\n    allow: [a.example]\n    phases: [agent, verify]')).catalog.sandbox
      .egress;
    expect(egressForRole(all, 'verify-1')).toBeDefined();
    expect(egressForRole(all, 'baseline')).toBeUndefined();
    expect(phaseOfRole('attempt-10')).toBe('agent');
  });

  it('reads ports, suffix patterns, deny rules with exceptions and private ranges', async () => {
    const egress = (
      await load(
        [
          '  egress:',
          '    allow:',
          '      - "*.corp.example"',
          '      - mirror.corp.example:8443',
          '      - {host: git.corp.example, ports: [22, 443]}',
          '    deny:',
          '      - {host: "*.corp.example", except: [mirror.corp.example, "*.pkg.corp.example"]}',
          '    privateRanges: [10.20.0.0/16]',
          '    resolvers: ["10.20.0.53", "10.20.0.54:5353"]',
        ].join('\n'),
      )
    ).catalog.sandbox.egress;
    expect(egressForRole(egress, 'attempt-1')).toEqual({
      allow: [
        { host: '*.corp.example', ports: [443, 80] },
        { host: 'mirror.corp.example', ports: [8443] },
        { host: 'git.corp.example', ports: [22, 443] },
      ],
      deny: [
        { host: '*.corp.example', ports: [443, 80], except: ['mirror.corp.example', '*.pkg.corp.example'] },
      ],
      privateRanges: ['10.20.0.0/16'],
      resolvers: ['10.20.0.53', '10.20.0.54:5353'],
    });
  });

  it('refuses IP addresses, bad patterns, bad ranges and unknown phases at their lines', async () => {
    expect(
      await problems(
        '  egress:\n    allow: ["10.0.0.1", "a b", "x.example:99999"]\n    privateRanges: [10.0.0.0]\n    phases: [review]',
      ),
    ).toEqual([
      expect.stringMatching(
        /^catalog\.yaml:12:\d+ sandbox\.egress\.allow\[0\]: "10\.0\.0\.1": an IP address cannot be allowed by name/,
      ),
      expect.stringMatching(/^catalog\.yaml:12:\d+ sandbox\.egress\.allow\[1\]: "a b"/),
      expect.stringMatching(/^catalog\.yaml:12:\d+ sandbox\.egress\.allow\[2\]: .*out of range/),
      expect.stringMatching(/^catalog\.yaml:13:\d+ sandbox\.egress\.privateRanges\[0\]: .*address range/),
      expect.stringMatching(
        /^catalog\.yaml:14:\d+ sandbox\.egress\.phases\[0\]: expected "agent", "baseline", "verify" or "build"/,
      ),
    ]);
    expect(await problems('  egress:\n    alow: [a.example]')).toEqual([
      expect.stringMatching(/sandbox\.egress\.alow: unknown key \(did you mean "allow"\?\)/),
    ]);
  });

  it('gives the image build egress only when "build" is listed, and no sandbox gets it from that', async () => {
    const agentOnly = await load('  egress:\n    allow: [registry.npmjs.org]');
    expect(buildEgress(agentOnly.catalog.sandbox.egress)).toBeUndefined();
    expect(catalogImageOptions({ catalog: agentOnly.catalog, dir })).not.toHaveProperty('buildEgress');
    const build = await load('  egress:\n    allow: [registry.npmjs.org]\n    phases: [build]');
    expect(buildEgress(build.catalog.sandbox.egress)).toMatchObject({
      allow: [{ host: 'registry.npmjs.org', ports: [443, 80] }],
    });
    expect(catalogImageOptions({ catalog: build.catalog, dir })).toMatchObject({
      buildNetwork: false,
      buildEgress: { allow: [{ host: 'registry.npmjs.org', ports: [443, 80] }] },
    });
    for (const role of ['attempt-1', 'baseline', 'verify-1'])
      expect(egressForRole(build.catalog.sandbox.egress, role)).toBeUndefined();
  });

  it('refuses the build phase together with the whole network, or with a prebuilt image', async () => {
    expect(
      await problems('  build: {network: true}\n  egress:\n    allow: [a.example]\n    phases: [build]'),
    ).toEqual([expect.stringMatching(/sandbox\.egress\.phases: egress phase "build" .*choose one/)]);
    expect(
      await problems('  image: node:20\n  egress:\n    allow: [a.example]\n    phases: [agent, build]'),
    ).toEqual([expect.stringMatching(/sandbox\.egress\.phases: egress phase "build" only applies when/)]);
  });

  it('exec --catalog gives its sandbox the egress of the agent phase, says so, and no more', async () => {
    const agent = await load('  egress:\n    allow: [registry.npmjs.org]');
    const spec = await catalogSpec(agent);
    expect(spec.egress).toMatchObject({ allow: [{ host: 'registry.npmjs.org', ports: [443, 80] }] });
    expect(egressNote(agent, spec.egress)).toBe("egress as the agent's (sandbox.egress): registry.npmjs.org");
    // Listed for the verification only: the exec sandbox (the agent's) gets network none, and says why.
    const verifyOnly = await load('  egress:\n    allow: [registry.npmjs.org]\n    phases: [verify]');
    const none = await catalogSpec(verifyOnly);
    expect(none).not.toHaveProperty('egress');
    expect(egressNote(verifyOnly, none.egress)).toBe(
      'network none: sandbox.egress does not list the agent phase (phases: verify)',
    );
    const plain = await load('  env: {A: "1"}');
    expect(await catalogSpec(plain)).not.toHaveProperty('egress');
    expect(egressNote(plain, undefined)).toBe('network none');
  });
});
