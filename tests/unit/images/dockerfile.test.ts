/**
 * What a Dockerfile makes the daemon fetch over the host's network even when the build has
 * no network: remote ADD sources and images that FROM / COPY --from would pull.
 */
import { describe, expect, it } from 'vitest';
import { daemonFetches } from '../../../src/image-context/dockerfile.js';

describe('daemonFetches', () => {
  it('finds remote ADD sources in both forms, with their line, and leaves local ones alone', () => {
    const dockerfile = [
      'ARG BASE_IMAGE',
      'FROM ${BASE_IMAGE}',
      'ADD https://example.test/tool.tgz /opt/',
      'ADD --chown=1000:1000 src/ /workspace/src/',
      'add ["http://example.test/a b.txt", "/tmp/"]',
      'ADD git@example.test:org/repo.git /src',
      '',
    ].join('\n');
    expect(daemonFetches(dockerfile, { BASE_IMAGE: 'sandbox-harness/base-node:20' })).toEqual([
      { line: 2, kind: 'image', ref: 'sandbox-harness/base-node:20', instruction: 'FROM ${BASE_IMAGE}' },
      { line: 3, kind: 'add-url', ref: 'https://example.test/tool.tgz', instruction: expect.any(String) },
      { line: 5, kind: 'add-url', ref: 'http://example.test/a b.txt', instruction: expect.any(String) },
      { line: 6, kind: 'add-url', ref: 'git@example.test:org/repo.git', instruction: expect.any(String) },
    ]);
  });

  it('follows line continuations, comments between them and the escape directive', () => {
    const backslash = [
      'FROM scratch',
      'ADD \\',
      '  # a comment inside',
      '  https://example.test/x \\',
      '  /x',
    ].join('\n');
    expect(daemonFetches(backslash)).toMatchObject([
      { line: 2, kind: 'add-url', ref: 'https://example.test/x' },
    ]);
    const backtick = ['# escape=`', 'FROM scratch', 'ADD `', '  https://example.test/y /y'].join('\n');
    expect(daemonFetches(backtick)).toMatchObject([
      { line: 3, kind: 'add-url', ref: 'https://example.test/y' },
    ]);
  });

  it('lists the images of FROM and COPY --from, resolving build arguments and ARG defaults, not stages or scratch', () => {
    const dockerfile = [
      'ARG TOOLS=tools/image:1',
      'ARG BASE_IMAGE',
      'FROM --platform=linux/amd64 ${TOOLS} AS build',
      'FROM scratch AS empty',
      'FROM $BASE_IMAGE',
      'COPY --from=build /out /workspace/out',
      'COPY --from=0 /out /x',
      'COPY --from=other/image:2 /bin/tool /usr/local/bin/',
      'FROM ${MISSING}',
    ].join('\n');
    expect(daemonFetches(dockerfile, { BASE_IMAGE: 'base:1' }).map((f) => [f.line, f.ref])).toEqual([
      [3, 'tools/image:1'],
      [5, 'base:1'],
      [8, 'other/image:2'],
    ]);
    expect(daemonFetches(dockerfile, { BASE_IMAGE: 'base:1', TOOLS: 'mine:2' })[0]?.ref).toBe('mine:2');
  });
});
