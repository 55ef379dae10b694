import { describe, expect, it } from 'vitest';
import { ConfigError, UsageError } from '../../../src/errors.js';
import { chooseProvider, createProvider } from '../../../src/llm/provider-registry.js';

describe('chooseProvider', () => {
  const keys = { ANTHROPIC_API_KEY: 'sk-ant-x', OPENAI_API_KEY: 'sk-x' };

  it('takes the --provider flag over everything else', () => {
    expect(
      chooseProvider({
        flagProvider: 'replay',
        env: { ...keys, SANDBOX_HARNESS_PROVIDER: 'openai' },
        catalogProvider: 'anthropic',
      }),
    ).toEqual({ name: 'replay', source: 'flag' });
  });

  it('takes SANDBOX_HARNESS_PROVIDER over the catalog', () => {
    expect(
      chooseProvider({ env: { ...keys, SANDBOX_HARNESS_PROVIDER: 'openai' }, catalogProvider: 'anthropic' }),
    ).toEqual({
      name: 'openai',
      source: 'env',
    });
  });

  it('takes the catalog over the credentials found in the environment', () => {
    expect(chooseProvider({ env: keys, catalogProvider: 'openai', catalogModel: 'gpt-4.1-mini' })).toEqual({
      name: 'openai',
      model: 'gpt-4.1-mini',
      source: 'catalog',
    });
  });

  it('defaults to anthropic when ANTHROPIC_API_KEY is set, even if OpenAI variables are too', () => {
    expect(chooseProvider({ env: keys })).toEqual({ name: 'anthropic', source: 'default' });
  });

  it('defaults to openai when only OPENAI_API_KEY or only OPENAI_BASE_URL is set', () => {
    expect(chooseProvider({ env: { OPENAI_API_KEY: 'sk-x' } }).name).toBe('openai');
    expect(chooseProvider({ env: { OPENAI_BASE_URL: 'http://127.0.0.1:11434/v1' } }).name).toBe('openai');
  });

  it('orders models the same way: flag, environment, then the catalog (only for its own provider)', () => {
    expect(
      chooseProvider({ flagModel: 'a', env: { ...keys, SANDBOX_HARNESS_MODEL: 'b' }, catalogModel: 'c' })
        .model,
    ).toBe('a');
    expect(chooseProvider({ env: { ...keys, SANDBOX_HARNESS_MODEL: 'b' }, catalogModel: 'c' }).model).toBe(
      'b',
    );
    expect(
      chooseProvider({
        flagProvider: 'openai',
        env: {},
        catalogProvider: 'anthropic',
        catalogModel: 'claude-x',
      }).model,
    ).toBeUndefined();
  });

  it('without any choice, fails with a usage error listing the three ways to choose', () => {
    const error = (() => {
      try {
        chooseProvider({ env: { ANTHROPIC_API_KEY: '  ' } });
      } catch (e) {
        return e;
      }
    })();
    expect(error).toBeInstanceOf(UsageError);
    const message = (error as UsageError).message;
    expect(message).toMatch(/--provider/);
    expect(message).toMatch(/ANTHROPIC_API_KEY/);
    expect(message).toMatch(/OPENAI_BASE_URL/);
    expect(message).toMatch(/catalog: `provider:/);
  });

  it('rejects unknown names, naming where they came from', () => {
    expect(() => chooseProvider({ flagProvider: 'gemini', env: {} })).toThrow(/--provider/);
    expect(() => chooseProvider({ env: { SANDBOX_HARNESS_PROVIDER: 'x' } })).toThrow(
      /SANDBOX_HARNESS_PROVIDER/,
    );
    expect(() => chooseProvider({ env: {}, catalogProvider: 'x' })).toThrow(ConfigError);
  });
});

describe('createProvider', () => {
  it('requires a cassette for replay', async () => {
    await expect(createProvider({ name: 'replay', env: {} })).rejects.toThrow(/cassette/);
  });

  it('requires ANTHROPIC_API_KEY for anthropic, read from the env it is given', async () => {
    await expect(createProvider({ name: 'anthropic', env: {} })).rejects.toBeInstanceOf(UsageError);
  });

  it('requires a key or a base URL for openai', async () => {
    await expect(createProvider({ name: 'openai', env: {} })).rejects.toThrow(
      /OPENAI_API_KEY, or OPENAI_BASE_URL/,
    );
  });

  it('rejects an unknown provider name', async () => {
    await expect(createProvider({ name: 'nope', env: {} })).rejects.toThrow(/unknown provider "nope"/);
  });

  it('builds providers with the chosen model without calling the network', async () => {
    const anthropic = await createProvider({
      name: 'anthropic',
      model: 'claude-test',
      env: { ANTHROPIC_API_KEY: 'k' },
    });
    expect([anthropic.name, anthropic.model]).toEqual(['anthropic', 'claude-test']);
    const openai = await createProvider({
      name: 'openai',
      env: { OPENAI_BASE_URL: 'http://127.0.0.1:1/v1' },
    });
    expect(openai.name).toBe('openai');
  });
});
