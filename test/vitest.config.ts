import { defineConfig } from 'vitest/config'

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    exclude: ['node_modules/**', 'dist/**'],
    testTimeout: 30_000,
    hookTimeout: 120_000,
    pool: 'forks',
    // One throwaway Redis and ClickHouse per run; tests read their URLs with inject() (see the file).
    globalSetup: ['test/global-setup.ts'],
  },
})
