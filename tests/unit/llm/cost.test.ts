/**
 * Money: the price table (built-in file, catalog overrides, prefixes), what one call costs
 * with and without prompt caching, the per-role meter every provider of a run counts into,
 * and a cost limit that refuses a model it cannot price.
 */
import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../../src/errors.js';
import { CostMeter, costOf, defaultPrices, priceFor, roundUsd } from '../../../src/llm/cost.js';
import { scripted, text } from '../agent/helpers.js';

describe('price table', () => {
  it('the built-in table loads and prices well-known models by prefix', () => {
    const table = defaultPrices();
    expect(priceFor('claude-sonnet-4-20250514', table)).toEqual({
      input: 3,
      output: 15,
      cacheRead: 0.3,
      cacheWrite: 3.75,
    });
    expect(priceFor('gpt-4o-mini-2024-07-18', table)?.input).toBe(0.15);
    // The longest prefix wins: gpt-4o-mini is not priced as gpt-4o.
    expect(priceFor('gpt-4o-2024-08-06', table)?.input).toBe(2.5);
    expect(priceFor('a-model-nobody-prices', table)).toBeUndefined();
  });

  it('an exact key beats any prefix', () => {
    const table = { 'm*': { input: 1, output: 1 }, 'm-1': { input: 7, output: 9 } };
    expect(priceFor('m-1', table)).toEqual({ input: 7, output: 9 });
    expect(priceFor('m-2', table)).toEqual({ input: 1, output: 1 });
  });
});

describe('costOf', () => {
  it('is tokens times the price per million', () => {
    expect(costOf({ inputTokens: 1_000_000, outputTokens: 1_000_000 }, { input: 3, output: 15 })).toBe(18);
    expect(costOf({ inputTokens: 1200, outputTokens: 40 }, { input: 3, output: 15 })).toBeCloseTo(
      (1200 * 3 + 40 * 15) / 1e6,
      12,
    );
  });

  it('prices cached prompt tokens apart, and never charges more cached tokens than the prompt had', () => {
    const price = { input: 3, output: 15, cacheRead: 0.3, cacheWrite: 3.75 };
    const usage = { inputTokens: 5312, outputTokens: 25, cacheReadTokens: 5000, cacheWriteTokens: 300 };
    expect(costOf(usage, price)).toBeCloseTo((12 * 3 + 5000 * 0.3 + 300 * 3.75 + 25 * 15) / 1e6, 12);
    const lying = { inputTokens: 10, outputTokens: 0, cacheReadTokens: 1_000_000 };
    expect(costOf(lying, price)).toBeCloseTo((10 * 0.3) / 1e6, 12);
    // Without cache prices, cached tokens cost what fresh ones do.
    expect(costOf(usage, { input: 3, output: 15 })).toBeCloseTo((5312 * 3 + 25 * 15) / 1e6, 12);
  });
});

describe('CostMeter', () => {
  it('counts each answered call under its role, priced by the model that answered', async () => {
    const meter = new CostMeter({ scripted: { input: 2, output: 10 } });
    const maker = meter.meter(
      scripted([
        { content: [text('a')], usage: { inputTokens: 1000, outputTokens: 100 } },
        { content: [text('b')], usage: { inputTokens: 3000, outputTokens: 300 } },
      ]),
      'main',
    );
    const checker = meter.meter(
      scripted([{ content: [text('ok')], usage: { inputTokens: 500, outputTokens: 50 } }]),
      'checker',
    );
    const request = { system: '', messages: [], tools: [], maxTokens: 10 };
    await maker.complete(request);
    await maker.complete(request);
    await checker.complete(request);
    expect(meter.byRole.get('main')).toMatchObject({ calls: 2, inputTokens: 4000, outputTokens: 400 });
    expect(meter.snapshot()).toEqual({
      usd: roundUsd((4000 * 2 + 400 * 10 + 500 * 2 + 50 * 10) / 1e6),
      byRole: { main: roundUsd((4000 * 2 + 400 * 10) / 1e6), checker: roundUsd((500 * 2 + 50 * 10) / 1e6) },
      // The price it was charged at stays with the record: tables change.
      prices: { scripted: { input: 2, output: 10 } },
    });
    // The wrapper is the provider as far as callers can tell.
    expect(maker.name).toBe('replay');
    expect(maker.model).toBe('scripted');
  });

  it('an unpriced model is counted as unpriced, never guessed at', async () => {
    const meter = new CostMeter({});
    const maker = meter.meter(scripted([{ content: [text('a')] }]), 'main');
    await maker.complete({ system: '', messages: [], tools: [], maxTokens: 10 });
    expect(meter.snapshot()).toEqual({ usd: 0, byRole: { main: 0 }, unpriced: ['scripted'] });
  });

  it('a call that used no tokens (a replayed oracle or prediction) needs no price: it is not named unpriced', async () => {
    const meter = new CostMeter({});
    const oracle = meter.meter(
      scripted([{ content: [text('a')], usage: { inputTokens: 0, outputTokens: 0 } }]),
      'main',
    );
    await oracle.complete({ system: '', messages: [], tools: [], maxTokens: 10 });
    expect(meter.snapshot()).toEqual({ usd: 0, byRole: { main: 0 } });
  });

  it('with a limit, a model without a price is refused before its first call', () => {
    const meter = new CostMeter({}, 1);
    expect(() => meter.meter(scripted([]), 'main')).toThrow(ConfigError);
    expect(() => meter.meter(scripted([]), 'main')).toThrow(
      /has no price: add it to the catalog's agent.prices/,
    );
  });

  it('is exceeded once the spend reaches the limit', async () => {
    const meter = new CostMeter({ scripted: { input: 1_000_000, output: 0 } }, 0.5);
    expect(meter.exceeded()).toBe(false);
    meter.add('main', 'scripted', { inputTokens: 1, outputTokens: 0 });
    expect(meter.exceeded()).toBe(true);
  });
});
