/**
 * Money. A price table (US dollars per million tokens, per model) turns each model call's
 * usage into a cost; a `CostMeter` adds them up per role, so a run, an attempt, a role and an
 * eval trial each have a cost, and a cost limit can stop a run before the next model call.
 *
 * The built-in table is `prices/default.yaml`; a catalog's `agent.prices` overrides it model
 * by model. A model with no price is never guessed at: its calls are counted as unpriced, and
 * a cost limit refuses to run with it (a limit that cannot be enforced is no limit).
 */
import { readFileSync } from 'node:fs';
import { parse } from 'yaml';
import { z } from 'zod';
import { ConfigError } from '../errors.js';
import { NUMBER_CAPS } from '../numbers.js';
import { estimateRequestTokens } from './tokens.js';
import type { Completion, CompletionRequest, ModelProvider, ModelRole, Usage } from './types.js';
import { estimatedUsage, impossibleUsage, usageProblem } from './usage.js';

const usd = z
  .number({ error: 'expected US dollars per million tokens' })
  .nonnegative({ error: 'expected US dollars per million tokens (0 or more)' })
  .max(NUMBER_CAPS.usdPerMillionTokens, {
    error: `expected US dollars per million tokens (at most ${NUMBER_CAPS.usdPerMillionTokens})`,
  });

export const priceSchema = z.strictObject({
  input: usd.meta({ description: 'Fresh prompt tokens, USD per million.' }),
  output: usd.meta({ description: 'Completion tokens, USD per million.' }),
  cacheRead: usd
    .optional()
    .meta({ description: 'Prompt tokens read from the prompt cache (default: input).' }),
  cacheWrite: usd
    .optional()
    .meta({ description: 'Prompt tokens written to the prompt cache (default: input).' }),
});
export type Price = z.infer<typeof priceSchema>;

/** Model name, or a prefix ending in `*`, to its price. */
export const priceTableSchema = z.record(z.string().min(1).max(200), priceSchema);
export type PriceTable = z.infer<typeof priceTableSchema>;

const priceFileSchema = z.strictObject({ version: z.literal(1), models: priceTableSchema });

let builtIn: PriceTable | undefined;

/** The built-in price table shipped with the harness (`prices/default.yaml`). */
export function defaultPrices(): PriceTable {
  if (builtIn) return builtIn;
  // From src/llm/ and from dist/llm/ alike, the file is two folders up.
  const url = new URL('../../prices/default.yaml', import.meta.url);
  const parsed = priceFileSchema.safeParse(parse(readFileSync(url, 'utf8')));
  if (!parsed.success) {
    throw new ConfigError(`the built-in price table ${url.pathname} is invalid: ${parsed.error.message}`);
  }
  builtIn = parsed.data.models;
  return builtIn;
}

/** The price of `model`: an exact key first, else the longest `prefix*` key that matches. */
export function priceFor(model: string, table: PriceTable): Price | undefined {
  const exact = table[model];
  if (exact) return exact;
  let best: { length: number; price: Price } | undefined;
  for (const [key, price] of Object.entries(table)) {
    if (!key.endsWith('*')) continue;
    const prefix = key.slice(0, -1);
    if (model.startsWith(prefix) && (!best || prefix.length > best.length))
      best = { length: prefix.length, price };
  }
  return best?.price;
}

/** What one call cost, in US dollars. Cached prompt tokens are part of `inputTokens`. */
export function costOf(usage: Usage, price: Price): number {
  const cacheRead = Math.min(usage.cacheReadTokens ?? 0, usage.inputTokens);
  const cacheWrite = Math.min(usage.cacheWriteTokens ?? 0, usage.inputTokens - cacheRead);
  const fresh = usage.inputTokens - cacheRead - cacheWrite;
  const perToken = (perMillion: number) => perMillion / 1_000_000;
  return (
    fresh * perToken(price.input) +
    cacheRead * perToken(price.cacheRead ?? price.input) +
    cacheWrite * perToken(price.cacheWrite ?? price.input) +
    usage.outputTokens * perToken(price.output)
  );
}

export interface RoleCost {
  usd: number;
  calls: number;
  inputTokens: number;
  outputTokens: number;
  cacheReadTokens: number;
  cacheWriteTokens: number;
}

const emptyRole = (): RoleCost => ({
  usd: 0,
  calls: 0,
  inputTokens: 0,
  outputTokens: 0,
  cacheReadTokens: 0,
  cacheWriteTokens: 0,
});

/** Rounds a dollar amount for records and reports (a hundredth of a cent). */
export function roundUsd(value: number): number {
  return Math.round(value * 1e6) / 1e6;
}

/**
 * The running cost of one run, per role. Every provider of the run is wrapped by `meter()`,
 * so nothing that calls a model can forget to count it.
 */
export class CostMeter {
  readonly byRole = new Map<ModelRole, RoleCost>();
  /** Models that answered without a price (their calls cost is unknown, counted as 0). */
  readonly unpriced = new Set<string>();

  constructor(
    readonly table: PriceTable,
    /** Stop before a model call once the run has spent this much (US dollars). */
    readonly limitUsd?: number,
  ) {}

  get totalUsd(): number {
    let sum = 0;
    for (const role of this.byRole.values()) sum += role.usd;
    return sum;
  }

  /** True once the run's cost limit is reached: no further model call may start. */
  exceeded(): boolean {
    return this.limitUsd !== undefined && this.totalUsd >= this.limitUsd;
  }

  /** The price each model that answered was charged at (the record keeps it: prices change). */
  readonly used = new Map<string, Price>();

  /** Counts one answered call; returns its cost. */
  add(role: ModelRole, model: string, usage: Usage): number {
    const price = priceFor(model, this.table);
    // A call that used no tokens (a replayed oracle's or prediction's) costs nothing at any
    // price: naming it unpriced would list every instance of an oracle run as a model.
    const used =
      usage.inputTokens + usage.outputTokens + (usage.cacheReadTokens ?? 0) + (usage.cacheWriteTokens ?? 0);
    if (price) this.used.set(model, price);
    else if (used > 0) this.unpriced.add(model);
    const cost = price ? costOf(usage, price) : 0;
    const entry = this.byRole.get(role) ?? emptyRole();
    entry.usd += cost;
    entry.calls += 1;
    entry.inputTokens += usage.inputTokens;
    entry.outputTokens += usage.outputTokens;
    entry.cacheReadTokens += usage.cacheReadTokens ?? 0;
    entry.cacheWriteTokens += usage.cacheWriteTokens ?? 0;
    this.byRole.set(role, entry);
    return cost;
  }

  /**
   * A provider whose answers are counted here under `role`. A limit needs a price: with one
   * set, a model that has none is refused before its first call.
   */
  meter(provider: ModelProvider, role: ModelRole): ModelProvider {
    if (this.limitUsd !== undefined && !priceFor(provider.model, this.table)) {
      throw new ConfigError(
        `a cost limit is set, but model ${JSON.stringify(provider.model)} (${role}) has no price: add it to the catalog's agent.prices`,
      );
    }
    return new MeteredProvider(provider, role, this);
  }

  /** The record's view: total and per role, rounded. */
  snapshot(): CostSnapshot {
    const byRole: Partial<Record<ModelRole, number>> = {};
    for (const [role, cost] of this.byRole) byRole[role] = roundUsd(cost.usd);
    return {
      usd: roundUsd(this.totalUsd),
      byRole,
      ...(this.used.size > 0 ? { prices: Object.fromEntries([...this.used].sort()) } : {}),
      ...(this.unpriced.size > 0 ? { unpriced: [...this.unpriced].sort() } : {}),
      limitUsd: this.limitUsd,
    };
  }
}

export interface CostSnapshot {
  usd: number;
  byRole: Partial<Record<ModelRole, number>>;
  /** The price of each model that answered, as charged. */
  prices?: Record<string, Price>;
  unpriced?: string[];
  limitUsd?: number | undefined;
}

class MeteredProvider implements ModelProvider {
  constructor(
    private readonly inner: ModelProvider,
    private readonly role: ModelRole,
    private readonly costs: CostMeter,
  ) {}

  get name(): string {
    return this.inner.name;
  }

  get model(): string {
    return this.inner.model;
  }

  async complete(request: CompletionRequest): Promise<Completion> {
    const completion = await this.inner.complete({
      ...request,
      // An answer refused for impossible token counts was still a call: counted by estimate.
      onRefusedUsage: (usage, model) => {
        this.costs.add(this.role, this.pricedModel(model), usage);
        request.onRefusedUsage?.(usage, model);
      },
    });
    // Priced by the model that answered (a router may answer with another than asked).
    const model = this.pricedModel(completion.model);
    const problem = usageProblem(completion.usage);
    if (problem) {
      // Every provider checks its server's counts; one that did not is refused here, counted by estimate.
      const estimate = estimatedUsage(estimateRequestTokens(request), completion.content);
      this.costs.add(this.role, model, estimate);
      throw impossibleUsage(this.inner.name, [problem], estimate);
    }
    this.costs.add(this.role, model, completion.usage);
    return completion;
  }

  /** `model` when the price table knows it, else the model this provider was asked for. */
  private pricedModel(model: unknown): string {
    return typeof model === 'string' && model !== '' && priceFor(model, this.costs.table)
      ? model
      : this.inner.model;
  }

  countTokens(request: CompletionRequest): Promise<number> {
    return this.inner.countTokens(request);
  }
}
