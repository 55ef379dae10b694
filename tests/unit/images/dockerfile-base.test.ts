import { describe, expect, it } from 'vitest';
import { argDefault, finalBaseImage } from '../../../src/image-context/dockerfile.js';

describe("a Dockerfile's base image", () => {
  it('reads the ARG BASE_IMAGE default before the first FROM, quoted or not', () => {
    expect(
      argDefault('ARG BASE_IMAGE=sandbox-harness/base-python:3\nFROM ${BASE_IMAGE}\n', 'BASE_IMAGE'),
    ).toEqual({
      value: 'sandbox-harness/base-python:3',
      line: 1,
    });
    expect(argDefault('# hi\nARG X=1 BASE_IMAGE="node:20"\nFROM $BASE_IMAGE\n', 'BASE_IMAGE')?.value).toBe(
      'node:20',
    );
    expect(argDefault('ARG BASE_IMAGE\nFROM ${BASE_IMAGE}\n', 'BASE_IMAGE')).toBeUndefined();
    expect(argDefault('FROM node:20\nARG BASE_IMAGE=python:3\n', 'BASE_IMAGE')).toBeUndefined();
  });

  it('resolves the final stage through build arguments and stage names', () => {
    const text =
      'ARG BASE_IMAGE=sandbox-harness/base-node:20\nFROM ${BASE_IMAGE} AS deps\nRUN true\nFROM deps\n';
    expect(finalBaseImage(text)).toBe('sandbox-harness/base-node:20');
    expect(finalBaseImage(text, { BASE_IMAGE: 'sandbox-harness/base-python:3' })).toBe(
      'sandbox-harness/base-python:3',
    );
    expect(finalBaseImage('FROM node:20 AS build\nFROM python:3.12-slim\n')).toBe('python:3.12-slim');
    expect(finalBaseImage('ARG B\nFROM ${B}\n')).toBeUndefined();
    expect(finalBaseImage('FROM scratch\n')).toBeUndefined();
  });
});
