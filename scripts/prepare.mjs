#!/usr/bin/env node
/**
 * npm's `prepare` (after `npm ci` or `npm install` in a clone): builds the package (`npm run build`: tsc, then the
 * CLI's bundle) unless dist/ was already built from these very sources, then links `antler` into the clone's own
 * node_modules/.bin (scripts/link-bin.mjs).
 *
 * Why it may skip: `npx antler` run in the clone itself (the README's `npx antler demo`) always installs the clone
 * into npx's cache first, as a link, because the command is the package's own bin (npm's exec looks at the
 * package's bins before its node_modules/.bin), and that install runs `prepare` in the clone again. Building again
 * took 40 s of CPU (minutes on a busy machine) for the same output. The build's inputs (src/, the tsconfigs, the
 * bundle's scripts, package.json and package-lock.json) are hashed; dist/prepare.json keeps the hash of the last
 * build that finished, written after it. `npm run build` always builds (and leaves the stamp as it was: the next
 * `prepare` builds once more).
 */
import { spawnSync } from "node:child_process"
import * as Crypto from "node:crypto"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"

const root = Path.resolve(Path.dirname(fileURLToPath(import.meta.url)), "..")
const stampFile = Path.join(root, "dist", "prepare.json")

const INPUTS = [
  "src",
  "tsconfig.base.json",
  "tsconfig.build.json",
  "scripts/bundle-cli.mjs",
  "scripts/bundle-externals.mjs",
  "package.json",
  "package-lock.json"
]

/** The files under `relative` (itself when a file), sorted, as paths relative to the root. */
const filesOf = (relative) => {
  const full = Path.join(root, relative)
  if (!Fs.existsSync(full)) return []
  if (!Fs.statSync(full).isDirectory()) return [relative]
  return Fs.readdirSync(full, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile())
    .map((entry) => Path.relative(root, Path.join(entry.parentPath ?? entry.path, entry.name)))
    .sort()
}

const inputsHash = () => {
  const hash = Crypto.createHash("sha256")
  for (const file of INPUTS.flatMap(filesOf)) {
    hash.update(file).update("\0").update(Fs.readFileSync(Path.join(root, file))).update("\0")
  }
  return hash.digest("hex")
}

const readStamp = () => {
  try {
    return JSON.parse(Fs.readFileSync(stampFile, "utf8"))?.inputs
  } catch {
    return undefined
  }
}

const built = () =>
  Fs.existsSync(Path.join(root, "dist", "programs", "main.js")) &&
  Fs.existsSync(Path.join(root, "dist", "index.js")) &&
  Fs.existsSync(Path.join(root, "dist", "cli", "build.json"))

const run = (args) => {
  const result = spawnSync(process.execPath, args, { cwd: root, stdio: "inherit" })
  if (result.status !== 0) process.exit(result.status ?? 1)
}

const inputs = inputsHash()
if (readStamp() === inputs && built()) {
  process.stdout.write("antler: dist/ is already built from these sources; not building again\n")
} else {
  Fs.rmSync(stampFile, { force: true })
  run([Path.join(root, "node_modules", "typescript", "bin", "tsc"), "-p", "tsconfig.build.json"])
  run([Path.join(root, "scripts", "bundle-cli.mjs")])
  Fs.writeFileSync(stampFile, JSON.stringify({ inputs }) + "\n")
}
run([Path.join(root, "scripts", "link-bin.mjs")])
