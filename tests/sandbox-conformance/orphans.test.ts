/**
 * What only the local engine needs checking once, beside its conformance run (docker.test.ts):
 * the orphan reaper and a daemon that cannot be reached. This file runs with no other test file
 * beside it (vitest.config.ts, ALONE): the reaper removes every harness container whose owner
 * is gone, on the first create of any backend, so a file starting sandboxes meanwhile would reap
 * the orphans planted here before these tests look for them. The titles are those of the
 * conformance run the tests came from.
 */
import { beforeAll, describe } from 'vitest';
import { dockerEngine } from '../../src/sandbox/docker/engine/index.js';
import { fixtureImage } from '../helpers/docker.js';
import { describeLocalEngineSpecifics } from './docker-targets.js';

describe('Docker API target: docker', () => {
  describe('docker: engine and runtime specifics', () => {
    let image = '';
    beforeAll(async () => {
      image = await fixtureImage('conformance');
    });
    describeLocalEngineSpecifics(() => ({ engine: dockerEngine(), image }));
  });
});
