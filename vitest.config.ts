import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['tests/**/*.test.ts'],
    // Docker-backed suites share one daemon on a 2-core machine; files run one at a time
    // so timings stay predictable and containers do not starve each other.
    fileParallelism: false,
    testTimeout: 120_000,
    hookTimeout: 300_000,
    reporters: ['default', ['json', { outputFile: '.vitest-report.json' }]],
    globalSetup: ['tests/global-setup.ts'],
  },
});
