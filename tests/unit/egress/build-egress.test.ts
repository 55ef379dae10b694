/**
 * Egress for an image build is refused, with its reason, wherever it cannot be enforced:
 * never a build with more network than the catalog names.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { buildRepoImage } from '../../../src/sandbox/docker/images/repo-image.js';
import { EgressUnsupported } from '../../../src/sandbox/docker/network/egress-network.js';
import type { DockerEngine } from '../../../src/sandbox/docker/engine/index.js';
import type { EgressPolicy } from '../../../src/egress-policy.js';
import { rejection } from '../../helpers/rejection.js';

const policy: EgressPolicy = {
  allow: [{ host: 'registry.npmjs.org', ports: [443] }],
  deny: [],
  privateRanges: [],
  resolvers: [],
};

/** An engine that fails the test if anything is asked of it beyond where it is. */
function engine(local: boolean): DockerEngine {
  return new Proxy({} as DockerEngine, {
    get(_, name) {
      if (name === 'isLocal') return () => local;
      if (name === 'where') return local ? undefined : 'tcp://build-host:2376';
      if (name === 'then') return undefined;
      throw new Error(`the engine was asked for ${String(name)} before the refusal`);
    },
  });
}

let repo: string;
beforeEach(async () => {
  repo = await mkdtemp(join(tmpdir(), 'build-egress-'));
  await writeFile(join(repo, 'package.json'), '{}\n');
});
afterEach(async () => {
  await rm(repo, { recursive: true, force: true });
});

describe('image build egress refusals', () => {
  it('on an engine that is not on this machine (no proxy or firewall there): refused before anything is built', async () => {
    const error = await rejection(
      buildRepoImage({ repoDir: repo, buildEgress: policy, rebuild: false, engine: engine(false) }),
      EgressUnsupported,
    );
    expect(error.message).toMatch(/egress for the image build cannot be enforced: .*not on this machine/);
  });

  it('together with the whole network: refused, never the wider of the two', async () => {
    const error = await rejection(
      buildRepoImage({
        repoDir: repo,
        buildEgress: policy,
        buildNetwork: true,
        rebuild: false,
        engine: engine(true),
      }),
      EgressUnsupported,
    );
    expect(error.message).toMatch(/both the whole network .* and egress by name/);
  });
});
