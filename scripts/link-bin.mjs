#!/usr/bin/env node
/**
 * Links `antler` into the clone's own node_modules/.bin (run by `prepare`, after `npm ci` or `npm install` in a
 * clone). Without it, `npx antler` in a clone does not find the command locally: npm then installs the clone
 * into its own cache as a package, building it once more (tsc and the bundle: half a minute or more), and the
 * hints the CLI prints name an `antler` only npx has on its PATH. With it, `npx antler` starts the clone's own
 * build at once. Nothing is done where there is no node_modules (an installed package gets its bin from npm).
 */
import * as Fs from "node:fs"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"

const root = Path.resolve(Path.dirname(fileURLToPath(import.meta.url)), "..")
const modules = Path.join(root, "node_modules")
// an installed package's node_modules is its parent's: only a clone (with a package.json here) has its own
if (Path.basename(Path.dirname(root)) !== "node_modules" && Fs.existsSync(modules)) {
  const bin = Path.join(modules, ".bin")
  const link = Path.join(bin, "antler")
  const target = Path.relative(bin, Path.join(root, "bin", "antler.js"))
  let current
  try {
    current = Fs.readlinkSync(link)
  } catch {
    current = undefined
  }
  if (current !== target) {
    Fs.mkdirSync(bin, { recursive: true })
    Fs.rmSync(link, { force: true })
    Fs.symlinkSync(target, link)
  }
}
