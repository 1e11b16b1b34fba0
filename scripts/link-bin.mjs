#!/usr/bin/env node
/**
 * Links `antler` into the clone's own node_modules/.bin (run last by `prepare`, scripts/prepare.mjs, after
 * `npm ci` or `npm install` in a clone), so that the clone's command is at a known place beside its packages
 * (`node_modules/.bin/antler`, what npm scripts find on their PATH). `npx antler` in the clone does not use it:
 * npm's exec runs a package's own bin by installing the package into its cache first, as a link to the clone,
 * which runs `prepare` once more (scripts/prepare.mjs then finds dist/ built from the same sources and does not
 * build again). Nothing is done where there is no node_modules (an installed package gets its bin from npm).
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
