/**
 * The paths that are never the agent's change unless a catalog turns them off
 * (`agent.ignoreChanges.disable`): what test runners, type checkers and bundlers write into a
 * project. Data of the catalog (its default), applied by `changes/ignore.ts`.
 */
export interface IgnoreDefault {
  /** The name the catalog turns it off by (`agent.ignoreChanges.disable`). */
  name: string;
  /** `.gitignore` syntax, evaluated at the workspace root. */
  patterns: readonly string[];
  /** Who writes it. */
  writer: string;
}

/** Caches and reports of test runners, type checkers and bundlers, at any depth (dependency folders included). */
export const DEFAULT_IGNORED: readonly IgnoreDefault[] = [
  { name: '.pytest_cache', patterns: ['.pytest_cache/'], writer: 'pytest' },
  { name: '__pycache__', patterns: ['__pycache__/'], writer: 'Python' },
  { name: '*.pyc', patterns: ['*.py[co]'], writer: 'Python 2-style bytecode' },
  { name: '.mypy_cache', patterns: ['.mypy_cache/'], writer: 'mypy' },
  { name: '.ruff_cache', patterns: ['.ruff_cache/'], writer: 'ruff' },
  { name: '.coverage', patterns: ['.coverage', '.coverage.*'], writer: 'coverage.py' },
  { name: 'htmlcov', patterns: ['htmlcov/'], writer: 'coverage.py' },
  { name: '.hypothesis', patterns: ['.hypothesis/'], writer: 'Hypothesis' },
  { name: '.tox', patterns: ['.tox/'], writer: 'tox' },
  { name: '.nox', patterns: ['.nox/'], writer: 'nox' },
  { name: '*.egg-info', patterns: ['*.egg-info/'], writer: 'setuptools' },
  { name: '.vite', patterns: ['.vite/'], writer: 'Vite, Vitest' },
  { name: '.vitest', patterns: ['.vitest/'], writer: 'Vitest' },
  { name: 'coverage', patterns: ['coverage/'], writer: 'Istanbul, c8, Jest, Vitest' },
  { name: '.nyc_output', patterns: ['.nyc_output/'], writer: 'nyc' },
  { name: '.eslintcache', patterns: ['.eslintcache'], writer: 'ESLint' },
  { name: '.stylelintcache', patterns: ['.stylelintcache'], writer: 'Stylelint' },
  {
    name: 'node_modules/.cache',
    patterns: ['**/node_modules/.cache/'],
    writer: 'Babel, ESM loaders, Webpack',
  },
  { name: '*.tsbuildinfo', patterns: ['*.tsbuildinfo'], writer: 'tsc --incremental / --build' },
  { name: '.cache', patterns: ['.cache/'], writer: 'Parcel 1, Gatsby, tools that follow XDG in the project' },
  { name: '.parcel-cache', patterns: ['.parcel-cache/'], writer: 'Parcel' },
  { name: '.turbo', patterns: ['.turbo/'], writer: 'Turborepo' },
  { name: '.swc', patterns: ['.swc/'], writer: 'SWC' },
];

export const DEFAULT_IGNORED_NAMES: readonly string[] = DEFAULT_IGNORED.map((d) => d.name);
