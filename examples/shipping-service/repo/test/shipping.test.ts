// The business rules come from the service catalog that sandbox-harness injects
// (read-only) into every sandbox, so the tests and the prompt always agree.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { shippingFee, STANDARD_SHIPPING_FEE } from '../src/shipping';

interface Catalog {
  rules: Record<string, { value: number | string | boolean }>;
}

function catalogThreshold(): number {
  const path = process.env.SERVICE_CATALOG;
  if (!path) throw new Error('SERVICE_CATALOG is not set: run the tests through sandbox-harness');
  const catalog = JSON.parse(readFileSync(path, 'utf8')) as Catalog;
  return Number(catalog.rules.freeShippingThreshold!.value);
}

test('orders at the catalog threshold ship free', () => {
  const threshold = catalogThreshold();
  assert.equal(shippingFee({ id: 'at', totalEur: threshold }), 0);
});

test('an order of 45 EUR ships free (OPS-412)', () => {
  assert.equal(shippingFee({ id: 'OPS-412', totalEur: 45 }), 0);
});

test('orders below the catalog threshold pay the standard fee', () => {
  const threshold = catalogThreshold();
  assert.equal(shippingFee({ id: 'below', totalEur: threshold - 0.01 }), STANDARD_SHIPPING_FEE);
});

test('a negative total is refused', () => {
  assert.throws(() => shippingFee({ id: 'neg', totalEur: -1 }), RangeError);
});
