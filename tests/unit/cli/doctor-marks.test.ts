/** `doctor` never puts a check mark next to something that is missing. */
import { describe, expect, it } from 'vitest';
import { checkMark, formatDoctor, type DoctorResult } from '../../../src/cli/commands/doctor.js';

describe('doctor rows', () => {
  it('mark a passed check ✓, a problem ✗, and an optional thing that is missing ! with a hint', () => {
    const result: DoctorResult = {
      ok: true,
      usable: true,
      exitCode: 0,
      endpoint: 'unix:///var/run/docker.sock',
      checks: [
        { name: 'daemon', ok: true, detail: 'answers' },
        {
          name: 'base-images',
          ok: true,
          warning: true,
          detail: 'node: sandbox-harness/base-node:20 (bootstrapped); python: not built (optional)',
          fix: 'only needed for projects on that base (sandbox.baseImage: sandbox-harness/base-python:3): sandbox-harness images ensure python',
        },
      ],
    };
    const lines = formatDoctor(result).split('\n');
    expect(lines).toContain('  ✓ daemon       answers');
    const row = lines.find((l) => l.includes('base-images'))!;
    expect(row.trim().startsWith('!')).toBe(true);
    expect(row).not.toContain('✓');
    expect(lines.some((l) => l.includes('hint:') && l.includes('sandbox-harness images ensure python'))).toBe(
      true,
    );
    expect(lines.at(-1)).toMatch(/^all checks passed \(1 with a note/);
    expect(checkMark({ ok: false })).toBe('✗');
    expect(checkMark({ ok: true })).toBe('✓');
    expect(checkMark({ ok: true, warning: true })).toBe('!');
  });
});
