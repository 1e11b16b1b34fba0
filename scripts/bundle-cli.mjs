#!/usr/bin/env node
/**
 * Bundles the `antler` command line into dist/cli/ (esbuild, from src/programs/main.ts): one ES module for what
 * every command loads, tree-shaken, plus a chunk for each part loaded later (`import()`). Loading a few large
 * files is much faster than resolving and loading about a thousand small ones, which is what start-up spent
 * most of its time on. bin/antler.js runs the bundle when it is there and at least as new as dist/programs/
 * (else dist/programs/main.js); the library (dist/index.js) is not bundled.
 *
 * Packages stay outside the bundle (loaded from node_modules, as from dist/) when they are native
 * (better-sqlite3) or loaded only at first use (the document converters' libraries, the MCP SDK, the tokenizer):
 * they are all dependencies of the package.
 *
 *   node scripts/bundle-cli.mjs [--sourcemap] [outdir]        # default dist/cli
 *
 * `--sourcemap` writes main.js.map beside the bundle (without a reference in it: the bundle is the same), which
 * the start-up bench uses to say which module a profiled frame came from.
 *
 * Without esbuild (a devDependency) it says so and exits 0: bin/antler.js then runs dist/programs/main.js.
 */
import * as Fs from "node:fs"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"

const root = Path.resolve(Path.dirname(fileURLToPath(import.meta.url)), "..")
const args = process.argv.slice(2)
const sourcemap = args.includes("--sourcemap")
const outdir = Path.resolve(root, args.find((arg) => !arg.startsWith("--")) ?? "dist/cli")

/** Loaded from node_modules at run time, never bundled. */
export const EXTERNAL = [
  "better-sqlite3",
  "@modelcontextprotocol/sdk",
  "exceljs",
  "mammoth",
  "jszip",
  "unpdf",
  "turndown",
  "@joplin/turndown-plugin-gfm",
  "gpt-tokenizer"
]

let esbuild
try {
  esbuild = await import("esbuild")
} catch {
  process.stdout.write("bundle-cli: esbuild is not installed; the CLI runs from dist/programs/ (slower start-up)\n")
  process.exit(0)
}

Fs.rmSync(outdir, { recursive: true, force: true })
const started = Date.now()
const result = await esbuild.build({
  absWorkingDir: root,
  entryPoints: { main: "src/programs/main.ts" },
  outdir,
  bundle: true,
  splitting: true,
  format: "esm",
  platform: "node",
  target: "node20",
  // not minified: no measurable gain in start-up here (V8 parses lazily), and stack traces stay readable
  sourcemap: sourcemap ? "external" : false,
  sourcesContent: false,
  external: EXTERNAL.flatMap((name) => [name, `${name}/*`]),
  // CommonJS packages in the bundle (yaml...) require Node's built-in modules
  banner: { js: "import { createRequire as __antlerCreateRequire } from \"node:module\"; const require = __antlerCreateRequire(import.meta.url);" },
  chunkNames: "chunks/[name]-[hash]",
  legalComments: "linked",
  logLevel: "warning"
})
if (result.errors.length > 0) process.exit(1)
const files = Fs.readdirSync(outdir, { recursive: true }).filter((f) => String(f).endsWith(".js"))
const bytes = files.reduce((n, f) => n + Fs.statSync(Path.join(outdir, f)).size, 0)
process.stdout.write(
  `bundle-cli: ${Path.relative(root, outdir)}/ (${files.length} files, ${(bytes / 1024 / 1024).toFixed(1)} MB) ` +
    `in ${((Date.now() - started) / 1000).toFixed(1)} s\n`
)
