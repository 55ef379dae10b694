/**
 * The in-memory fake runs the same file-level contract as Docker: when Docker's behaviour
 * and the fake's differ, this file (or docker.test.ts) goes red, not a unit test that
 * quietly relied on the fake.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { MemorySandbox, type MemoryEntry } from '../fakes/memory-sandbox.js';
import { FIXTURES } from '../helpers/docker.js';
import { describeFileConformance } from './files.js';

function fixtureFiles(dir: string): Record<string, MemoryEntry> {
  const out: Record<string, MemoryEntry> = {};
  const walk = (current: string) => {
    for (const name of readdirSync(current)) {
      const full = join(current, name);
      if (statSync(full).isDirectory()) walk(full);
      else if (name !== 'Dockerfile.sandbox') out[relative(dir, full)] = readFileSync(full);
    }
  };
  walk(dir);
  return out;
}

// What the conformance fixture's Dockerfile.sandbox adds to the repo's files.
const files: Record<string, MemoryEntry> = {
  ...fixtureFiles(join(FIXTURES, 'repos', 'conformance')),
  locked: { type: 'directory', owner: 'root' },
  'locked/file.txt': { type: 'file', content: 'locked\n', owner: 'root' },
  'node_modules/dep/index.js': 'dep\n',
};

describeFileConformance({
  name: 'in-memory fake',
  make: async (spec = {}) => new MemorySandbox(files, undefined, undefined, spec.hidden ?? []),
  arrange: async (sandbox, steps) => {
    const box = sandbox as MemorySandbox;
    for (const step of steps) {
      if ('symlink' in step) box.set(step.symlink.path, { type: 'symlink', target: step.symlink.target });
      else if ('hardlink' in step) box.link(step.hardlink.existing, step.hardlink.path);
      else if ('fifo' in step) box.set(step.fifo, { type: 'fifo' });
      else if ('mkdir' in step) box.set(step.mkdir, { type: 'directory' });
      else if ('remove' in step) box.delete(step.remove);
      else if ('write' in step) box.set(step.write.path, step.write.content);
      else {
        const node = box.nodes.get(step.chmod.path);
        if (node && 'mode' in node) node.mode = step.chmod.mode;
      }
    }
  },
  cleanup: async () => undefined,
});
