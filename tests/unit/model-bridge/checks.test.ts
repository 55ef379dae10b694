/**
 * What the bridge lets through: known endpoints only, an allowed model, a JSON body under
 * the cap, no tool the provider would run outside the sandbox, and only two protocol
 * headers of the sandbox's, validated.
 */
import { describe, expect, it } from 'vitest';
import { checkRequest, endpointOf, type RelayedRequest } from '../../../src/model-bridge/checks.js';

const policy = {
  allowedModels: ['claude-test', 'gpt-test'],
  maxRequestBytes: 1000,
  families: new Set(['anthropic', 'openai'] as const),
};

function request(
  path: string,
  body: unknown,
  headers: [string, string][] = [],
  method = 'POST',
): RelayedRequest {
  return {
    method,
    path,
    headers,
    body: Buffer.from(typeof body === 'string' ? body : JSON.stringify(body)),
  };
}

const refusal = (r: RelayedRequest) => {
  const result = checkRequest(r, policy);
  return result.ok ? undefined : result.refusal;
};

describe('the bridge checks', () => {
  it('knows the four endpoints, and nothing else (other methods, lookalike paths)', () => {
    expect(endpointOf('POST', '/v1/messages?beta=true')).toBe('anthropic-messages');
    expect(endpointOf('POST', '/v1/messages/count_tokens')).toBe('anthropic-count-tokens');
    expect(endpointOf('POST', '/v1/chat/completions')).toBe('openai-chat');
    expect(endpointOf('POST', '/v1/responses')).toBe('openai-responses');
    for (const [method, path] of [
      ['GET', '/v1/messages'],
      ['HEAD', '/api/hello'],
      ['POST', '/v1/messages/../files'],
      ['POST', '/v1//messages'],
      ['POST', '/v1/Messages'],
      ['POST', '/v1/messages%2F..%2Ffiles'],
      ['POST', '/v1/files'],
      ['POST', '/v1/models'],
    ] as const) {
      expect(endpointOf(method, path), `${method} ${path}`).toBeUndefined();
      expect(refusal(request(path, { model: 'claude-test' }, [], method))).toMatchObject({
        kind: 'unknown-endpoint',
        status: 404,
      });
    }
  });

  it('passes an allowed model with its canonical path and only the beta query', () => {
    const result = checkRequest(
      request('/v1/messages?beta=true&key=x', { model: 'claude-test', stream: true, messages: [] }),
      policy,
    );
    expect(result).toMatchObject({
      ok: true,
      request: {
        api: 'anthropic-messages',
        path: '/v1/messages',
        query: '?beta=true',
        model: 'claude-test',
        stream: true,
      },
    });
    const other = checkRequest(request('/v1/responses?api-key=1', { model: 'gpt-test' }), policy);
    expect(other).toMatchObject({ ok: true, request: { path: '/v1/responses', query: '', stream: false } });
  });

  it('refuses a model the run does not allow, or none, naming the allowed ones', () => {
    expect(refusal(request('/v1/messages', { model: 'claude-opus-99' }))).toMatchObject({
      kind: 'model-not-allowed',
      status: 400,
      message: expect.stringContaining('allowed: claude-test, gpt-test'),
    });
    expect(refusal(request('/v1/responses', { input: 'x' }))?.kind).toBe('model-not-allowed');
    expect(refusal(request('/v1/responses', { model: ['gpt-test'] }))?.kind).toBe('model-not-allowed');
  });

  it('refuses a body over the cap, one that is not a JSON object, and a compressed one', () => {
    expect(refusal(request('/v1/messages', { model: 'claude-test', pad: 'x'.repeat(1000) }))).toMatchObject({
      kind: 'too-large',
      status: 413,
    });
    expect(refusal(request('/v1/messages', '{"model":'))?.kind).toBe('bad-json');
    expect(refusal(request('/v1/messages', '["claude-test"]'))?.kind).toBe('bad-json');
    expect(refusal(request('/v1/messages', 'null'))?.kind).toBe('bad-json');
    expect(
      refusal(request('/v1/messages', { model: 'claude-test' }, [['Content-Encoding', 'gzip']]))?.kind,
    ).toBe('encoded-body');
  });

  it('refuses hosted tools that would act outside the sandbox, and lets client tools through', () => {
    const anthropic = (tools: unknown, extra: object = {}) =>
      refusal(request('/v1/messages', { model: 'claude-test', tools, ...extra }));
    expect(
      anthropic([
        { name: 'Edit', input_schema: {} },
        { type: 'bash_20250124', name: 'bash' },
      ]),
    ).toBeUndefined();
    expect(anthropic([{ type: 'custom', name: 'x', input_schema: {} }])).toBeUndefined();
    expect(anthropic([{ type: 'web_search_20250305', name: 'web_search' }])?.kind).toBe('network-tool');
    expect(anthropic([{ type: 'web_fetch_20250910', name: 'web_fetch' }])?.kind).toBe('network-tool');
    expect(anthropic([{ type: 'code_execution_20250825', name: 'c' }])?.kind).toBe('network-tool');
    expect(anthropic([], { mcp_servers: [{ type: 'url', url: 'https://example.invalid/mcp' }] })?.kind).toBe(
      'network-tool',
    );
    expect(anthropic('web_search')?.kind).toBe('network-tool');
    const openai = (tools: unknown, extra: object = {}) =>
      refusal(request('/v1/responses', { model: 'gpt-test', tools, ...extra }));
    expect(
      openai([
        { type: 'function', name: 'exec_command' },
        { type: 'namespace', name: 'n', tools: [] },
      ]),
    ).toBeUndefined();
    expect(openai([{ type: 'web_search' }])?.message).toMatch(/hosted tool "web_search"/);
    expect(openai([{ type: 'mcp', server_url: 'https://example.invalid' }])?.kind).toBe('network-tool');
    expect(openai([{ type: 'file_search' }])?.kind).toBe('network-tool');
    expect(openai([{ name: 'no type' }])?.kind).toBe('network-tool');
    expect(openai([], { background: true })?.kind).toBe('network-tool');
    expect(
      refusal(request('/v1/chat/completions', { model: 'gpt-test', web_search_options: {} }))?.kind,
    ).toBe('network-tool');
  });

  it('keeps only a well-formed anthropic-version and anthropic-beta; every other header is never read', () => {
    const ok = checkRequest(
      request('/v1/messages', { model: 'claude-test' }, [
        ['Anthropic-Version', '2023-06-01'],
        ['anthropic-beta', 'claude-code-20250219,interleaved-thinking-2025-05-14'],
        ['x-api-key', 'placeholder'],
      ]),
      policy,
    );
    expect(ok).toMatchObject({
      ok: true,
      request: {
        anthropicVersion: '2023-06-01',
        anthropicBeta: 'claude-code-20250219,interleaved-thinking-2025-05-14',
      },
    });
    const smuggled = checkRequest(
      request('/v1/messages', { model: 'claude-test' }, [
        ['anthropic-version', '2023-06-01\r\nx-api-key: ${ANTHROPIC_API_KEY}'],
        ['anthropic-beta', 'a, b\r\nauthorization: Bearer x'],
      ]),
      policy,
    );
    expect(smuggled.ok && smuggled.request.anthropicVersion).toBeUndefined();
    expect(smuggled.ok && smuggled.request.anthropicBeta).toBeUndefined();
  });

  it('refuses an API whose provider the run does not have', () => {
    const result = checkRequest(request('/v1/responses', { model: 'gpt-test' }), {
      ...policy,
      families: new Set(['anthropic'] as const),
    });
    expect(result.ok ? undefined : result.refusal.kind).toBe('no-provider');
  });
});
