import { test } from 'node:test';
import assert from 'node:assert/strict';
import { grams } from '../src/weight.mjs';

test('zero weighs nothing', () => assert.equal(grams(0), 0));
