/**
 * Run by tests/integration/isolation-docker.test.ts in a process of its own, so that its peak
 * memory is this case's alone: a command over the channel opens an end frame with its real
 * token (it can read it) and floods 300 MB after it. Prints one JSON line.
 * Usage: node channel-flood.mjs <dist folder> <image>
 */
const [dist, image] = process.argv.slice(2);
const { dockerBackend } = await import(`${dist}/sandbox/docker/docker-sandbox.js`);
const box = await dockerBackend().create({ image, role: 'isolation', runId: 'isolation-test' });
try {
  await box.exec('true', { fast: true });
  const before = process.memoryUsage().rss;
  const r = await box.exec(
    'printf \'\\0SHX %s \' "$SANDBOX_HARNESS_EXEC"; yes abcdefgh | head -c 300000000; echo; exit 5',
    { fast: true, timeoutMs: 120_000, maxOutputBytes: 65_536 },
  );
  const peak = process.resourceUsage().maxRSS * 1024;
  console.log(
    JSON.stringify({ code: r.exitCode, truncated: r.truncated, length: r.stdout.length, before, peak }),
  );
} finally {
  await box.dispose();
}
