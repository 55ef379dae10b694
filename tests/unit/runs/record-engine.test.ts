/**
 * The engine fields of a run record are data like the rest of it: `inspect`, `shell` and
 * `rerun-tests` follow them to an engine, so what they may say is checked on read.
 */
import { describe, expect, it } from 'vitest';
import { recordProblem, type RunRecord } from '../../../src/runs/record.js';

const record = (extra: Record<string, unknown> = {}): Record<string, unknown> => ({
  id: 'run-1',
  version: 2,
  harnessVersion: '0.1.0',
  startedAt: '2026-01-01T00:00:00.000Z',
  outcome: 'failed',
  ticket: { source: 'inline' },
  catalog: { name: 'c', file: '/c.yaml', hash: 'h' },
  repoDir: '/repo',
  provider: { name: 'replay', model: 'm' },
  keep: 'on-failure',
  apply: false,
  attempts: [],
  tokens: { input: 0, output: 0 },
  turns: 0,
  containers: [{ role: 'attempt-1', id: 'a'.repeat(64), kept: true, engine: 'box-a' }],
  testCommand: [],
  ...extra,
});

describe('engine fields of run.json', () => {
  it('accepts the engine a run ran on and each way of finding it again', () => {
    for (const engineRef of [
      { file: '/home/me/engines.yaml', entry: 'box-a' },
      { context: 'build-box' },
      { url: 'tcp://10.0.0.5:2376' },
      { url: 'ssh://ci@runner-3:2222' },
      { url: 'unix:///run/other.sock' },
    ] satisfies RunRecord['engineRef'][]) {
      expect(recordProblem(record({ engine: 'box-a', engineRef }), 'run-1')).toBeUndefined();
    }
  });

  it('accepts a reference that names its backend (docker) beside the fields that backend owns', () => {
    for (const engineRef of [
      { backend: 'docker', file: '/home/me/engines.yaml', entry: 'box-a' },
      { backend: 'docker', context: 'build-box' },
      { backend: 'docker', url: 'tcp://10.0.0.5:2376' },
    ] satisfies RunRecord['engineRef'][]) {
      expect(recordProblem(record({ engine: 'box-a', engineRef }), 'run-1')).toBeUndefined();
    }
    // The backend's own schema checks its fields, named or not; no backend reads another's fields.
    for (const engineRef of [
      { backend: 'docker', context: '-H tcp://x' },
      { backend: 'docker', url: 'ssh://ci:hunter2@runner-3' },
      { backend: 'kubernetes', url: 'tcp://10.0.0.5:2376' },
      { backend: 'docker', url: 'tcp://h:1', tls: { key: 'PRIVATE' } },
    ]) {
      expect(
        recordProblem(record({ engine: 'box-a', engineRef }), 'run-1'),
        JSON.stringify(engineRef),
      ).toMatch(/engineRef/);
    }
  });

  it('refuses a reference that is not a plain name, an absolute engines file or an engine URL without a password', () => {
    const refused: Array<[unknown, RegExp]> = [
      [{ file: 'engines.yaml', entry: 'box-a' }, /engineRef/],
      [{ file: '/etc/shadow', entry: 'box-a' }, /engineRef/],
      [{ file: '/e.yaml', entry: '../x' }, /engineRef/],
      [{ context: '-H tcp://x' }, /engineRef/],
      [{ url: 'ssh://ci:hunter2@runner-3' }, /engineRef/],
      [{ url: 'http://example.com/x y' }, /engineRef/],
      [{ url: 'ftp://host' }, /engineRef/],
      [{ url: 'tcp://h:1', tls: { key: 'PRIVATE' } }, /engineRef/],
    ];
    for (const [engineRef, problem] of refused) {
      expect(
        recordProblem(record({ engine: 'box-a', engineRef }), 'run-1'),
        JSON.stringify(engineRef),
      ).toMatch(problem);
    }
  });

  it('refuses an engine name that is not a plain name, on the record and on a container', () => {
    expect(recordProblem(record({ engine: 'box a; rm' }), 'run-1')).toMatch(/^engine: /);
    expect(
      recordProblem(
        record({ containers: [{ role: 'attempt-1', id: 'a'.repeat(64), kept: true, engine: '../b' }] }),
        'run-1',
      ),
    ).toMatch(/^containers\.0\.engine: /);
  });

  it('opens an old record (no backend, a hex Docker id) and a new one (a backend name, an opaque sandbox id)', () => {
    // The shape every record had before the backend was named: still a valid record.
    expect(recordProblem(record(), 'run-1')).toBeUndefined();
    expect(
      recordProblem(
        record({
          backend: 'kubernetes',
          containers: [{ role: 'attempt-1', id: 'sandbox-run-1.a1:0', kept: true }],
        }),
        'run-1',
      ),
    ).toBeUndefined();
    for (const id of ['../../etc', '-rf', 'a/b', '', 'x'.repeat(300)]) {
      expect(
        recordProblem(record({ containers: [{ role: 'attempt-1', id, kept: true }] }), 'run-1'),
      ).toBeDefined();
    }
    expect(recordProblem(record({ backend: '../docker' }), 'run-1')).toBeDefined();
  });
});
