#!/usr/bin/env node
/**
 * Bundles the `antler` command line into dist/cli/ (esbuild, from src/programs/main.ts), for a fast start:
 *
 * - main.cjs: the program in one file, tree-shaken. Loading one file is much faster than resolving and loading
 *   about a thousand small ones (what start-up spent most of its time on). CommonJS, so that bin/cli-loader.js
 *   can compile it with a V8 code cache (Node 20 has no code cache for ES modules).
 * - main.cjs.cache: that cache, saved by running `antler --help` once from the bundle: V8 then skips parsing and
 *   compiling what every command loads.
 *
 * - build.json: the build's stamp (its id, also the bundle's first line), written last. bin/antler.js runs the
 *   bundle when the stamp is there (else dist/programs/main.js); the library (dist/index.js) is not bundled. Packages stay outside the bundle, loaded
 * from node_modules as from dist/, when they are native (better-sqlite3) or loaded only at first use (the
 * document converters' libraries, the MCP SDK, the tokenizer, the parsers of src/internal/OnDemand.ts): all are
 * dependencies of the package. What the sources load with `import()` is loaded with `require()` here (every
 * such package has a CommonJS build).
 *
 *   node scripts/bundle-cli.mjs [--sourcemap] [outdir]        # default dist/cli
 *
 * `--sourcemap` writes main.cjs.map beside the bundle (without a reference in it: the bundle is the same), which
 * the start-up bench uses to say which module a profiled frame came from.
 * Without esbuild (a devDependency) it says so and exits 0: bin/antler.js then runs dist/programs/main.js.
 */
import { spawnSync } from "node:child_process"
import * as Crypto from "node:crypto"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import { external } from "./bundle-externals.mjs"

const root = Path.resolve(Path.dirname(fileURLToPath(import.meta.url)), "..")
const args = process.argv.slice(2)
const sourcemap = args.includes("--sourcemap")
const outdir = Path.resolve(root, args.find((arg) => !arg.startsWith("--")) ?? "dist/cli")
const bundle = Path.join(outdir, "main.cjs")

let esbuild
try {
  esbuild = await import("esbuild")
} catch {
  process.stdout.write("bundle-cli: esbuild is not installed; the CLI runs from dist/programs/ (slower start-up)\n")
  process.exit(0)
}

Fs.rmSync(outdir, { recursive: true, force: true })
const buildId = Crypto.randomBytes(8).toString("hex")
const started = Date.now()
const result = await esbuild.build({
  absWorkingDir: root,
  entryPoints: ["src/programs/main.ts"],
  outfile: bundle,
  bundle: true,
  format: "cjs",
  platform: "node",
  target: "node20",
  // `import()` becomes `require()`: a script compiled with a code cache (vm.Script) has no `import()` of its own
  supported: { "dynamic-import": false },
  define: { "import.meta.url": "__antlerImportMetaUrl" },
  // the build's id first (bin/choose.js and bin/cli-loader.js match it with build.json's)
  banner: {
    js: `/* antler-build ${buildId} */\nconst __antlerImportMetaUrl = require("node:url").pathToFileURL(__filename).href;`
  },
  // not minified: no measurable gain in start-up here (V8 parses lazily), and stack traces stay readable
  sourcemap: sourcemap ? "external" : false,
  sourcesContent: false,
  external: external(),
  legalComments: "linked",
  logLevel: "warning"
})
if (result.errors.length > 0) process.exit(1)

// The code cache: `antler --help` from the bundle (loads every command), saved as the process exits. It needs
// the same Node and V8 flags as the runs that use it; any other Node ignores it.
const home = Fs.mkdtempSync(Path.join(Os.tmpdir(), "antler-bundle-"))
try {
  const loader = new URL("../bin/cli-loader.js", import.meta.url).href
  const warm = spawnSync(process.execPath, [
    "--input-type=module",
    "--eval",
    `process.argv = [process.execPath, "antler", "--help"]
     const { loadCli } = await import(${JSON.stringify(loader)})
     loadCli(${JSON.stringify(bundle)}, { writeCache: true })`
  ], { cwd: home, env: { ...process.env, ANTLER_HOME: home, NO_COLOR: "1" }, encoding: "utf8" })
  if (warm.status !== 0 || !Fs.existsSync(`${bundle}.cache`)) {
    process.stderr.write(`bundle-cli: the bundle does not run (antler --help):\n${warm.stdout}${warm.stderr}\n`)
    process.exit(1)
  }
} finally {
  Fs.rmSync(home, { recursive: true, force: true })
}

// The stamp, written last: the build finished (bin/choose.js runs the bundle only then), and the code cache
// beside it belongs to this bundle (bin/cli-loader.js offers it to V8 only then). File times decide nothing:
// npm's unpacking of a package leaves them in any order.
const version = JSON.parse(Fs.readFileSync(Path.join(root, "package.json"), "utf8")).version
Fs.writeFileSync(Path.join(outdir, "build.json"), `${JSON.stringify({ id: buildId, version, node: process.version })}\n`)

const size = (file) => (Fs.statSync(file).size / 1024 / 1024).toFixed(1)
process.stdout.write(
  `bundle-cli: ${Path.relative(root, bundle)} (${size(bundle)} MB) and its code cache (${size(`${bundle}.cache`)} MB) ` +
    `in ${((Date.now() - started) / 1000).toFixed(1)} s\n`
)
