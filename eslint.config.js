import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  {
    ignores: [
      'dist/**',
      'node_modules/**',
      'examples/**/node_modules/**',
      'bench/results/**',
      'coverage/**',
      '.sandbox-harness/**',
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ['**/*.ts'],
    rules: {
      '@typescript-eslint/no-explicit-any': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      'no-restricted-imports': [
        'error',
        {
          paths: [{ name: 'dockerode', message: 'Only src/sandbox/docker/engine/ may import dockerode.' }],
        },
      ],
    },
  },
  {
    // The backend seam: above src/sandbox/, only the registry reaches a backend's folder (tests may).
    files: ['src/**/*.ts'],
    ignores: ['src/sandbox/docker/**', 'src/sandbox/backend-registry.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          paths: [{ name: 'dockerode', message: 'Only src/sandbox/docker/engine/ may import dockerode.' }],
          patterns: [
            {
              regex: '(^|/)sandbox/docker/|^\\.\\.?/docker/',
              message:
                'Only src/sandbox/backend-registry.ts reaches the Docker backend: use the provider (sandboxProvider) or the registry.',
            },
          ],
        },
      ],
    },
  },
  {
    files: ['src/sandbox/docker/engine/**/*.ts'],
    rules: { 'no-restricted-imports': 'off' },
  },
  {
    files: ['src/llm/anthropic/**/*.ts', 'src/llm/openai/**/*.ts'],
    rules: { '@typescript-eslint/no-explicit-any': 'off' },
  },
  {
    files: ['**/*.mjs', '**/*.js'],
    languageOptions: {
      globals: {
        process: 'readonly',
        console: 'readonly',
        URL: 'readonly',
        setTimeout: 'readonly',
        Buffer: 'readonly',
      },
    },
  },
);
