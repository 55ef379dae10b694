/** SANDBOX_HARNESS_DEBUG=1: every Engine API request on stderr, with how long it took. */
import { describe, expect, it } from 'vitest';
import { cleanEnv, runCli } from '../helpers/cli.js';

describe('the engine debug log', () => {
  it('lists every engine call with its duration, and nothing without the variable', async () => {
    const on = await runCli(['doctor', '--json'], { env: cleanEnv({ SANDBOX_HARNESS_DEBUG: '1' }) });
    // The duration in the CLI's style (src/format.ts): `12ms`, `1.2s`, `1m05s`.
    const took = String.raw`(?:\d+ms|\d+\.\ds|\d+m\d\ds)`;
    expect(on.stderr).toMatch(new RegExp(String.raw`^\[engine local\] GET /_ping ${took}$`, 'm'));
    expect(on.stderr).toMatch(
      new RegExp(String.raw`^\[engine local\] POST /containers/create\S* ${took}`, 'm'),
    );
    const off = await runCli(['doctor', '--json']);
    expect(off.stderr).not.toMatch(/\[engine /);
  });
});
