/** SANDBOX_HARNESS_DEBUG=1: every Engine API request on stderr, with how long it took. */
import { describe, expect, it } from 'vitest';
import { cleanEnv, runCli } from '../helpers/cli.js';

describe('the engine debug log', () => {
  it('lists every engine call with its duration, and nothing without the variable', async () => {
    const on = await runCli(['doctor', '--json'], { env: cleanEnv({ SANDBOX_HARNESS_DEBUG: '1' }) });
    expect(on.stderr).toMatch(/^\[engine local\] GET \/_ping \d+ ms$/m);
    expect(on.stderr).toMatch(/^\[engine local\] POST \/containers\/create\S* \d+ ms/m);
    const off = await runCli(['doctor', '--json']);
    expect(off.stderr).not.toMatch(/\[engine /);
  });
});
