/**
 * vitest global setup: bundles the CLI from the current sources (scripts/bundle-cli.mjs, esbuild) into
 * dist/test-cli/ once per test run, so tests that start `antler` as a process start it in a fraction of the time
 * tsx needs to transpile the program for every process. The bundle is made from the same sources the other tests
 * import; test/programs/Bundle.test.ts checks the bundle's own concerns. Without esbuild, tests run the sources
 * through tsx (see `antlerCommand` in test/support/cli.ts).
 */
import { spawnSync } from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"

const ROOT = Path.resolve(Path.dirname(fileURLToPath(import.meta.url)), "../..")

export default function setup() {
  const outdir = Path.join(ROOT, "dist", "test-cli")
  const built = spawnSync(process.execPath, [Path.join(ROOT, "scripts", "bundle-cli.mjs"), outdir], {
    cwd: ROOT,
    encoding: "utf8"
  })
  const bundle = Path.join(outdir, "main.cjs")
  if (built.status === 0 && Fs.existsSync(bundle)) process.env.ANTLER_TEST_CLI = bundle
  else process.stderr.write(`[test] the CLI bundle was not built; CLI tests run the sources through tsx\n${built.stderr}`)
}
