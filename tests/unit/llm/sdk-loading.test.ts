/**
 * Only the chosen provider's SDK is loaded: the registry reaches each SDK through a
 * dynamic import, so a replay run never loads either and an OpenAI run never loads
 * Anthropic's. The mocks below only note that a module was loaded, then pass it through.
 */
import { describe, expect, it, vi } from 'vitest';
import { createProvider } from '../../../src/llm/provider-registry.js';
import { ReplayProvider } from '../../../src/llm/replay.js';

const loaded = vi.hoisted(() => ({ anthropic: 0, openai: 0 }));

vi.mock('@anthropic-ai/sdk', async (importOriginal) => {
  loaded.anthropic++;
  return importOriginal();
});
vi.mock('openai', async (importOriginal) => {
  loaded.openai++;
  return importOriginal();
});

describe('SDK loading', () => {
  it('loads no SDK for replay, then only the one chosen', async () => {
    const replay = new ReplayProvider({ version: 1, model: 'm', turns: [] });
    expect(replay.name).toBe('replay');
    expect(loaded).toEqual({ anthropic: 0, openai: 0 });

    await createProvider({ name: 'openai', env: { OPENAI_BASE_URL: 'http://127.0.0.1:9/v1' } });
    expect(loaded).toEqual({ anthropic: 0, openai: 1 });

    await createProvider({
      name: 'anthropic',
      env: { ANTHROPIC_API_KEY: 'k', ANTHROPIC_BASE_URL: 'http://127.0.0.1:9' },
    });
    expect(loaded).toEqual({ anthropic: 1, openai: 1 });
  });
});
