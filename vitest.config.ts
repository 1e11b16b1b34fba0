import { defineConfig } from "vitest/config"

export default defineConfig({
  // `import "antler"` (the package's own name, as the examples use it) resolves to the sources in tests
  resolve: { conditions: ["antler-source"] },
  test: {
    include: ["test/**/*.test.ts"],
    // the CLI bundled once from the sources, for tests that start it as a process (test/support/cli.ts)
    // and the run's temporary files in one directory, removed at the end (test/support/tmpDir.ts)
    globalSetup: ["test/support/tmpDir.ts", "test/support/cliBundle.ts"],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // each worker runs its test files in one module graph (vitest imports the sources and their packages once per
    // worker, not once per file: a third of the suite's time on 2 cores); what a file could leave behind for the
    // next is put back before each file (test/support/setupFile.ts)
    isolate: false,
    setupFiles: ["test/support/setupFile.ts"],
    pool: "forks",
    // three test files at a time on any machine (vitest's default is one fewer than the cores: one on 2 cores):
    // the slowest files (clusters of processes, lease lives) mostly wait on other processes; with two, the suite
    // used about 1,000 CPU-seconds in 790 s on 2 cores, two thirds of them
    maxWorkers: 3,
    // as many kept as used: tinypool ends a worker idle beyond the minimum, and that ending can fail the whole run
    // with "Terminating worker thread" after every test passed (vitest-dev/vitest#8564)
    minWorkers: 3
  }
})
