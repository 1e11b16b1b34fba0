/**
 * The package as a user installs it: `npm pack` (or a given tarball), `npm install <tarball> effect@^3.22` into a
 * fresh app folder (install scripts run: better-sqlite3 is fetched or compiled as for a user), then, from that
 * install,
 *   install       the size of node_modules (du), its packages (`npm ls --all --parseable`), npm's warnings
 *   import        `import "antler"` in a fresh node, median of N (its time inside the process and the process's
 *                 wall time), and the packages it loads (those of the optional features must be absent)
 *   version       `antler --version` from the installed bin, median of N
 *   demo          `antler demo` (a complete offline run) from the installed bin, median of N
 *   program       which program bin/antler.js runs there (bin/choose.js: the bundle when its build stamp is there)
 * Prints one JSON object and writes it to bench/results/install-<label>.json.
 *   npm run bench:install                                    # packs this checkout
 *   node dist-bench/bench/install.js '{"tarball":"/tmp/antler-0.1.0.tgz","label":"before","runs":10}'
 *   node dist-bench/bench/install.js '{"app":"/tmp/an-app","label":"before"}'   # an install made before
 */
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"
import { median, round } from "./common.js"

interface Job {
  /** A tarball to install (default: `npm pack` of this checkout). */
  readonly tarball?: string
  /** Names the result file (default `current`). */
  readonly label?: string
  /** Measured runs of each start-up (default 10). */
  readonly runs?: number
  /** Keep the app folder (its path is printed). */
  readonly keep?: boolean
  /** An app folder where `npm install <tarball> effect@^3.22` was already run: measured as it is, nothing installed. */
  readonly app?: string
}

/** Packages an app that embeds the agent must not load with `import "antler"`. */
const OPTIONAL = [
  "exceljs",
  "mammoth",
  "unpdf",
  "jszip",
  "turndown",
  "@modelcontextprotocol/sdk",
  "@agentclientprotocol/sdk",
  "@opentelemetry/api",
  "@effect/opentelemetry",
  "@effect/cli",
  "@effect/platform-node",
  "openai",
  "undici"
]

const here = path.dirname(fileURLToPath(import.meta.url))
const root = path.resolve(here, "..", fs.existsSync(path.join(here, "..", "package.json")) ? "" : "..")
const job = JSON.parse(process.argv[2] ?? "{}") as Job
const runs = job.runs ?? 10
const label = job.label ?? "current"

interface Spawned {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
  readonly wallMs: number
}

const exec = (command: string, args: ReadonlyArray<string>, cwd: string, env: NodeJS.ProcessEnv = process.env) =>
  new Promise<Spawned>((resolve, reject) => {
    const t0 = performance.now()
    const child = spawn(command, args, { cwd, env, stdio: ["ignore", "pipe", "pipe"] })
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString("utf8")))
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString("utf8")))
    child.on("error", reject)
    child.on("close", (code) => resolve({ code, stdout, stderr, wallMs: performance.now() - t0 }))
  })

const must = (what: string, r: Spawned): Spawned => {
  if (r.code !== 0) throw new Error(`${what}: exit ${r.code}\n${r.stdout.slice(-1500)}\n${r.stderr.slice(-1500)}`)
  return r
}

/** A user's environment: none of our OPENAI_* / ANTLER_* / OTEL_*, no colour. */
const userEnv = (extra: Record<string, string>): NodeJS.ProcessEnv => {
  const env: NodeJS.ProcessEnv = {}
  for (const [key, value] of Object.entries(process.env)) {
    if (!/^(OPENAI_|ANTLER_|OTEL_)/.test(key)) env[key] = value
  }
  return { ...env, NO_COLOR: "1", ...extra }
}

const stats = (values: ReadonlyArray<number>) => ({
  median: round(median([...values])),
  min: round(Math.min(...values)),
  max: round(Math.max(...values)),
  runs: values.map((x) => round(x))
})

const IMPORT_PROGRAM = `
const t0 = performance.now()
await import("antler")
const ms = performance.now() - t0
process.stdout.write(JSON.stringify({ ms }) + "\\n")
`

/** The floor under any Effect app, measured beside it: Effect's core modules and Schema (which loads fast-check). */
const FLOOR_PROGRAM = `
const t0 = performance.now()
for (const m of ["effect/Effect", "effect/Layer", "effect/Stream", "effect/Schema"]) await import(m)
const ms = performance.now() - t0
process.stdout.write(JSON.stringify({ ms }) + "\\n")
`

/** The packages `import "antler"` loads, from the modules Node resolved (the start-up bench's inventory hooks). */
const packagesLoaded = async (app: string): Promise<ReadonlyArray<string>> => {
  const list = path.join(scratch, "modules.txt")
  const inventory = pathToFileURL(path.join(here, "startupInventory.js")).href
  must(
    "import \"antler\" (inventory)",
    await exec(process.execPath, ["--import", inventory, "--input-type=module", "-e", "await import('antler')"], app, {
      ...userEnv({}),
      ANTLER_BENCH_MODULES: list
    })
  )
  const names = new Set<string>()
  for (const url of fs.readFileSync(list, "utf8").split("\n")) {
    const match = /\/node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(url)
    if (match !== null) names.add(match[1]!)
  }
  return [...names].sort()
}

const t0 = performance.now()
const scratch = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "antler-bench-install-")))
let result: Record<string, unknown>
try {
  let tarball = job.tarball
  let app: string
  let installed: Spawned | undefined
  if (job.app !== undefined) {
    app = path.resolve(job.app)
  } else {
    if (tarball === undefined) {
      const packed = must("npm pack", await exec("npm", ["pack", "--pack-destination", scratch, "--silent"], root))
      tarball = path.join(scratch, packed.stdout.trim().split("\n").at(-1)!)
    }
    app = path.join(scratch, "app")
    fs.mkdirSync(app)
    fs.writeFileSync(path.join(app, "package.json"), JSON.stringify({ name: "an-app", private: true, type: "module" }))
    installed = must("npm install", await exec("npm", ["install", tarball, "effect@^3.22", "--no-audit", "--no-fund"], app))
  }
  const warnings = (installed?.stderr ?? "").split("\n").filter((line) => /npm warn/i.test(line))
  const du = must("du", await exec("du", ["-sb", "node_modules"], app))
  const listed = await exec("npm", ["ls", "--all", "--parseable"], app)
  const packages = new Set(listed.stdout.split("\n").filter((line) => line.includes("node_modules"))).size

  // import "antler": one unmeasured run first (the page cache holds the modules)
  // (interleaved with the floor, so that both see the same machine)
  const imports: Array<number> = []
  const importWalls: Array<number> = []
  const floors: Array<number> = []
  const inProcess = (r: Spawned) => (JSON.parse(r.stdout.trim().split("\n").at(-1)!) as { ms: number }).ms
  for (let i = 0; i <= runs; i++) {
    const r = must("import \"antler\"", await exec(process.execPath, ["--input-type=module", "-e", IMPORT_PROGRAM], app, userEnv({})))
    const floor = must("import effect", await exec(process.execPath, ["--input-type=module", "-e", FLOOR_PROGRAM], app, userEnv({})))
    if (i === 0) continue
    imports.push(inProcess(r))
    importWalls.push(r.wallMs)
    floors.push(inProcess(floor))
  }
  const loaded = await packagesLoaded(app)

  // the installed command
  const pkg = path.join(app, "node_modules", "antler")
  const bin = path.join(pkg, "bin", "antler.js")
  const chose = must(
    "bin/choose.js",
    await exec(process.execPath, [
      "--input-type=module",
      "-e",
      `const { choose } = await import(${JSON.stringify(pathToFileURL(path.join(pkg, "bin", "choose.js")).href)})
       const c = choose(new URL(${JSON.stringify(pathToFileURL(pkg + path.sep).href)}))
       process.stdout.write(c === undefined ? "none" : c.kind)`
    ], app)
  ).stdout.trim()
  const home = path.join(scratch, "home")
  fs.mkdirSync(home)
  const timed = async (args: ReadonlyArray<string>) => {
    const walls: Array<number> = []
    for (let i = 0; i <= runs; i++) {
      const r = must(`antler ${args.join(" ")}`, await exec(process.execPath, [bin, ...args], home, userEnv({ ANTLER_HOME: home })))
      if (i > 0) walls.push(r.wallMs)
    }
    return stats(walls)
  }
  const version = await timed(["--version"])
  const threadsList = await timed(["threads", "list"])
  const demo = await timed(["demo"])

  result = {
    label,
    tarball: tarball === undefined ? null : path.basename(tarball),
    date: new Date().toISOString(),
    node: process.version,
    loadavg: os.loadavg().map((x) => round(x, 2)),
    install: {
      command: "npm install <tarball> effect@^3.22",
      seconds: installed === undefined ? null : round(installed.wallMs / 1000, 1),
      nodeModulesMB: round(Number(du.stdout.split(/\s+/)[0]) / 1e6, 1),
      packages,
      npmWarnings: installed === undefined ? null : warnings.length,
      eresolveWarnings: installed === undefined ? null : warnings.filter((line) => line.includes("ERESOLVE")).length
    },
    import: {
      inProcessMs: stats(imports),
      // effect/Effect, Layer, Stream and Schema alone, in the same install, interleaved
      effectFloorMs: stats(floors),
      processWallMs: stats(importWalls),
      packagesLoaded: loaded.length,
      optionalLoaded: OPTIONAL.filter((name) => loaded.includes(name))
    },
    cli: { program: chose, version, threadsList, demo },
    ...(job.keep === true ? { app } : {})
  }
} finally {
  if (job.keep !== true) fs.rmSync(scratch, { recursive: true, force: true })
}
result.jobWallS = round((performance.now() - t0) / 1000, 1)
const resultsDir = path.join(root, "bench", "results")
fs.mkdirSync(resultsDir, { recursive: true })
fs.writeFileSync(path.join(resultsDir, `install-${label}.json`), JSON.stringify(result, null, 2) + "\n")
process.stdout.write(JSON.stringify(result) + "\n")
