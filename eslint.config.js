import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/', 'node_modules/', 'bench/results/', 'coverage/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/no-explicit-any': 'error',
    },
  },
  {
    // Type-aware, for the code that ships: a promise nobody awaits or catches is how a daemon
    // dies of an unhandled rejection, or goes on after a write that failed.
    files: ['src/**/*.ts', 'daemon/**/*.ts', 'cli/**/*.ts', 'cli/**/*.tsx', 'bin/**/*.ts', 'simulator/**/*.ts'],
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/await-thenable': 'error',
    },
  },
  {
    // A record with named fields says what each value is: a long positional list is how two
    // arguments of one type get swapped unnoticed.
    files: ['src/**/*.ts', 'daemon/**/*.ts', 'daemon/**/*.tsx'],
    rules: { 'max-params': ['error', 5] },
  },
  {
    // src/ is the pure core: no process globals, no servers, no UI.
    files: ['src/**/*.ts'],
    rules: {
      'no-restricted-globals': ['error', { name: 'process', message: 'src/ is pure: pass config in.' }],
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: ['fastify', 'fastify/*', 'ink', 'react', 'commander', 'chalk'],
              message: 'src/ is the pure core.',
            },
            {
              group: ['../daemon/*', '../cli/*', '../../daemon/*', '../../cli/*', '../bin/*'],
              message: 'src/ imports nothing outside src/.',
            },
          ],
        },
      ],
    },
  },
  {
    // The simulator stands where a GPU model server would: it shares no code with the gateway.
    files: ['simulator/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: ['../src/*', '../daemon/*', '../cli/*', '../bin/*'],
              message: 'simulator/ imports nothing of the gateway.',
            },
          ],
        },
      ],
    },
  },
  {
    files: ['daemon/**/*.ts', 'daemon/**/*.tsx'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: ['../cli/*', '../../cli/*', '../../../cli/*'],
              message: 'daemon/ and cli/ never import each other.',
            },
          ],
        },
      ],
    },
  },
  {
    files: ['cli/**/*.ts', 'cli/**/*.tsx'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: ['../daemon/*', '../../daemon/*', '../../../daemon/*'],
              message: 'daemon/ and cli/ never import each other.',
            },
          ],
        },
      ],
    },
  },
  {
    // Names and messages may hold control characters: the console draws text only through its own Text.
    files: ['cli/console/**/*.ts', 'cli/console/**/*.tsx'],
    ignores: ['cli/console/components/text.tsx'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          paths: [
            {
              name: 'ink',
              importNames: ['Text'],
              message: 'Use Text from cli/console/components/text.tsx: it escapes control characters.',
            },
          ],
          patterns: [
            {
              group: ['../daemon/*', '../../daemon/*', '../../../daemon/*'],
              message: 'daemon/ and cli/ never import each other.',
            },
          ],
        },
      ],
    },
  },
);
