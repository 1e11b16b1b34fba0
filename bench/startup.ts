/**
 * Start-up jobs of `npm run bench`: the wall time of the `antler` command as users run it (`node
 * bin/antler.js`, the built dist/), median of N after one unmeasured run:
 *   version       `antler --version`
 *   threads-list  `antler threads list` on a data directory holding 100 threads (made by the lead agent
 *                 through the public API over the SQLite store, one short turn each)
 *   run           `antler run "..."` against the loopback scripted Chat Completions server, from spawn to
 *                 the arrival of its first model request (and to its exit)
 * `entry` says what runs: `bin` (default) `node bin/antler.js`, which runs the bundle dist/cli/main.cjs with its V8
 * code cache when it is built (else dist/programs/main.js) and answers `--version` alone itself; `compiled`
 * `node dist/programs/main.js`; `bundle` `node dist/cli/main.cjs` (the bundle without its code cache).
 * Then CPU profiles of the same command (`--cpu-prof`; for `run` cut at the first request), summarised by
 * phase, package, module and function (bench/cpuProfile.ts), and an inventory of the modules it loads; the
 * raw profile and the summary are written to bench/results/startup-<command>.*. Prints one JSON object.
 *   node dist-bench/bench/startup.js '{"kind":"startup","command":"version","runs":10,"profiles":3}'
 */
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import * as LocalSandbox from "../src/layers/LocalSandbox.js"
import * as ScriptedChatServer from "../src/layers/ScriptedChatServer.js"
import * as ScriptedModel from "../src/layers/ScriptedModel.js"
import * as SqliteThreadStore from "../src/layers/SqliteThreadStore.js"
import * as LeadAgent from "../src/programs/LeadAgent.js"
import type { AppConfig } from "../src/services/AppConfig.js"
import { AppConfigSchema, AppConfigService } from "../src/services/AppConfig.js"
import { ModelService } from "../src/services/ModelService.js"
import * as M from "../src/state/Message.js"
import type { CpuProfile } from "./cpuProfile.js"
import { groupModules, summarize } from "./cpuProfile.js"
import { median, round } from "./common.js"
import type { SourceMapV3 } from "./sourceMap.js"
import { mapProfile } from "./sourceMap.js"

type Command = "version" | "threads-list" | "run"
type Entry = "bin" | "compiled" | "bundle"
interface Job {
  readonly kind: "startup"
  readonly command: Command
  /** What runs (default `bin`). */
  readonly entry?: Entry
  /** Measured runs. */
  readonly runs: number
  /** Profiled runs (summarised together). */
  readonly profiles: number
  /** Threads in the data directory for `threads-list`. */
  readonly threads?: number
}

const here = path.dirname(fileURLToPath(import.meta.url))
const root = path.resolve(here, "..", fs.existsSync(path.join(here, "..", "package.json")) ? "" : "..")
const BIN = path.join(root, "bin", "antler.js")
const MAIN = path.join(root, "dist", "programs", "main.js")
const BUNDLE = path.join(root, "dist", "cli", "main.cjs")
const TIME = "/usr/bin/time"
const PROFILE_INTERVAL_US = 200
const job = JSON.parse(process.argv[2] ?? "{}") as Job
const entry: Entry = job.entry ?? "bin"
const ENTRY = { bin: BIN, compiled: MAIN, bundle: BUNDLE }[entry]
/**
 * The program bin/antler.js runs (as it chooses: the bundle unless missing or older than dist/programs/; itself
 * for `--version` alone).
 */
const binRuns = (): string => {
  if (job.command === "version") return BIN
  const at = (file: string) => (fs.existsSync(file) ? fs.statSync(file).mtimeMs : undefined)
  const bundled = at(BUNDLE)
  const compiled = at(MAIN)
  return bundled !== undefined && (compiled === undefined || bundled >= compiled) ? BUNDLE : MAIN
}
const threadCount = job.threads ?? 100
const version = JSON.parse(fs.readFileSync(path.join(root, "package.json"), "utf8")).version as string

const tempDir = (prefix: string) => fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), prefix)))
const home = tempDir("antler-bench-startup-")
const scratch = tempDir("antler-bench-startup-tmp-")

/** The environment a user would have: none of our OPENAI_* / ANTLER_*, the data directory, no colour. */
const cliEnv = (extra: Record<string, string> = {}): NodeJS.ProcessEnv => {
  const env: NodeJS.ProcessEnv = {}
  for (const [key, value] of Object.entries(process.env)) {
    if (!key.startsWith("OPENAI_") && !key.startsWith("ANTLER_")) env[key] = value
  }
  return { ...env, ANTLER_HOME: home, NO_COLOR: "1", ...extra }
}

interface Spawned {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
  readonly wallMs: number
  /** User + system CPU of the whole process (from /usr/bin/time), when available. */
  readonly cpuMs: number | undefined
  /** `process.hrtime` at spawn, in microseconds (the clock of the profiles). */
  readonly spawnedUs: number
  readonly t0: number
}

let spawnCount = 0
const timeAvailable = fs.existsSync(TIME)

/** Runs `node [nodeArgs] bin/antler.js [args]` in the data directory and waits for it to exit. */
const cli = (
  args: ReadonlyArray<string>,
  options: { readonly nodeArgs?: ReadonlyArray<string>; readonly env?: Record<string, string>; readonly onSpawn?: (t0: number) => void } = {}
): Promise<Spawned> =>
  new Promise((resolve, reject) => {
    const timeFile = timeAvailable ? path.join(scratch, `time-${spawnCount++}`) : undefined
    const argv = [...(options.nodeArgs ?? []), ENTRY, ...args]
    const [command, commandArgs] = timeFile === undefined
      ? [process.execPath, argv]
      : [TIME, ["-f", "%U %S", "-o", timeFile, process.execPath, ...argv]]
    const spawnedUs = Number(process.hrtime.bigint() / 1000n)
    const t0 = performance.now()
    options.onSpawn?.(t0)
    const child = spawn(command, commandArgs, { cwd: home, env: cliEnv(options.env), stdio: ["ignore", "pipe", "pipe"] })
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString("utf8")))
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString("utf8")))
    child.on("error", reject)
    child.on("close", (code) => {
      const wallMs = performance.now() - t0
      let cpuMs: number | undefined
      if (timeFile !== undefined && fs.existsSync(timeFile)) {
        const [user, system] = fs.readFileSync(timeFile, "utf8").trim().split("\n").pop()!.split(" ").map(Number)
        if (Number.isFinite(user) && Number.isFinite(system)) cpuMs = round((user! + system!) * 1000)
      }
      resolve({ code, stdout, stderr, wallMs, cpuMs, spawnedUs, t0 })
    })
  })

const fail = (what: string, r: Spawned): never => {
  throw new Error(`${what}: exit ${r.code}\nstdout: ${r.stdout.slice(-1500)}\nstderr: ${r.stderr.slice(-1500)}`)
}

// ---------------------------------------------------------------------------------------------------------
// The data directory of `threads list`: threads made the way an app makes them

const seedThreads = (count: number): Promise<ReadonlyArray<string>> => {
  const config = Schema.decodeUnknownSync(AppConfigSchema)({ models: [{ name: "scripted", model: "scripted" }] }) as AppConfig
  const appConfig = Layer.succeed(AppConfigService, { config, source: undefined, ignored: [], home })
  const services = Layer.mergeAll(
    appConfig,
    SqliteThreadStore.layerFromHome(home),
    LocalSandbox.layer().pipe(Layer.provide(appConfig))
  )
  const model = ScriptedModel.make((request) => {
    const human = [...request.messages].reverse().find((m) => m.type === "human")
    return `Done: ${human === undefined ? "" : M.text(human).slice(0, 40)}`
  })
  const agent = LeadAgent.layer({ sandboxTools: false }).pipe(
    Layer.provide(Layer.succeed(ModelService, model)),
    Layer.provideMerge(services)
  )
  const ids = Array.from({ length: count }, () => M.newId())
  const program = Effect.gen(function*() {
    const lead = yield* LeadAgent.LeadAgent
    for (const [i, threadId] of ids.entries()) {
      const end = yield* lead.turn({ threadId, prompt: `Summarise the notes in report-${i}.md`, options: { modelName: "scripted" } })
      if (end.status !== "success") throw new Error(`seeding thread ${threadId} ended ${JSON.stringify(end)}`)
    }
    return ids
  })
  return Effect.runPromise(Effect.provide(program, agent))
}

// ---------------------------------------------------------------------------------------------------------
// Measuring

interface Measured {
  readonly wallMs: number
  readonly cpuMs: number | undefined
  readonly firstRequestMs?: number
  readonly firstRequestUs?: number
  readonly spawnedUs: number
}

/** One `antler run` against the server: the time its first request arrives (set by the server's script). */
interface Pending {
  t0: number
  firstMs: number | undefined
  firstUs: number | undefined
}

const measureOnce = async (
  command: Command,
  url: string,
  pending: Pending,
  nodeArgs: ReadonlyArray<string> = [],
  env: Record<string, string> = {},
  seeded: ReadonlyArray<string> = []
): Promise<Measured> => {
  if (command === "version") {
    const r = await cli(["--version"], { nodeArgs, env })
    if (r.code !== 0 || !r.stdout.trim().split(/\s+/).includes(version)) fail(`antler --version printed no ${version}`, r)
    return r
  }
  if (command === "threads-list") {
    const r = await cli(["threads", "list"], { nodeArgs, env })
    const listed = seeded.filter((id) => r.stdout.includes(id)).length
    if (r.code !== 0 || listed !== seeded.length) fail(`antler threads list showed ${listed} of ${seeded.length} threads`, r)
    return r
  }
  pending.firstMs = undefined
  pending.firstUs = undefined
  const r = await cli(["run", "--base-url", url, "--api-key", "bench", "Say hello."], {
    nodeArgs,
    env,
    onSpawn: (t0) => (pending.t0 = t0)
  })
  if (r.code !== 0 || !r.stdout.includes("Hello from the scripted server.")) fail("antler run did not answer", r)
  if (pending.firstMs === undefined) fail("antler run sent no request", r)
  return { ...r, firstRequestMs: pending.firstMs!, firstRequestUs: pending.firstUs! }
}

const newProfiles = (dir: string, before: ReadonlySet<string>) =>
  fs.readdirSync(dir).filter((f) => f.endsWith(".cpuprofile") && !before.has(f))

const measureAll = async (url: string, pending: Pending) => {
  const seeded = job.command === "threads-list" ? await seedThreads(threadCount) : []
  // one unmeasured run first: the page cache holds the modules, the store exists and is migrated
  await measureOnce(job.command, url, pending, [], {}, seeded)
  const runs: Array<Measured> = []
  for (let i = 0; i < job.runs; i++) runs.push(await measureOnce(job.command, url, pending, [], {}, seeded))

  // CPU profiles: samples every PROFILE_INTERVAL_US; a sample counts at most 2 intervals (see cpuProfile.ts).
  // The bundle's frames are mapped to their modules with its source map (scripts/bundle-cli.mjs --sourcemap).
  const program = entry === "bin" ? binRuns() : ENTRY
  const bundleUrl = pathToFileURL(program).href
  const sourceMap = program === BUNDLE && fs.existsSync(`${program}.map`)
    ? JSON.parse(fs.readFileSync(`${program}.map`, "utf8")) as SourceMapV3
    : undefined
  const profileDir = path.join(scratch, "profiles")
  fs.mkdirSync(profileDir, { recursive: true })
  const profiles: Array<{ profile: CpuProfile; untilUs?: number | undefined; file: string }> = []
  let clockAligned = true
  for (let i = 0; i < job.profiles; i++) {
    const before = new Set(fs.readdirSync(profileDir))
    const nodeArgs = ["--cpu-prof", "--cpu-prof-dir", profileDir, "--cpu-prof-interval", String(PROFILE_INTERVAL_US)]
    const m = await measureOnce(job.command, url, pending, nodeArgs, {}, seeded)
    const file = newProfiles(profileDir, before)[0]
    if (file === undefined) throw new Error("--cpu-prof wrote no profile")
    const raw = JSON.parse(fs.readFileSync(path.join(profileDir, file), "utf8")) as CpuProfile
    const profile = sourceMap === undefined ? raw : mapProfile(raw, bundleUrl, sourceMap, `${program}.map`)
    // the profile's clock is the monotonic clock of process.hrtime: cut at the first request if it falls inside
    const aligned = m.firstRequestUs === undefined ||
      (profile.startTime >= m.spawnedUs && m.firstRequestUs > profile.startTime && m.firstRequestUs <= profile.endTime)
    clockAligned &&= aligned
    profiles.push({ profile, untilUs: aligned ? m.firstRequestUs : undefined, file: path.join(profileDir, file) })
  }
  const summary = summarize(profiles, {
    root,
    capUs: 2 * PROFILE_INTERVAL_US,
    top: 20,
    bundles: sourceMap === undefined ? [] : [bundleUrl]
  })

  // the modules it loads (an untimed run with resolve hooks)
  const listFile = path.join(scratch, "modules.txt")
  const inventory = path.join(here, "startupInventory.js")
  await measureOnce(job.command, url, pending, ["--import", pathToFileURL(inventory).href], {
    ANTLER_BENCH_MODULES: listFile
  }, seeded)
  const urls = [...new Set(fs.readFileSync(listFile, "utf8").split("\n").filter((l) => l !== ""))]
    .filter((u) => !u.startsWith(pathToFileURL(path.join(root, "dist-bench")).href))
  const sized = urls.flatMap((u) => {
    try {
      return [{ url: u, bytes: fs.statSync(fileURLToPath(u)).size }]
    } catch {
      return []
    }
  })
  const modules = groupModules(sized, root)
  return { runs, summary, modules, profiles, clockAligned, mapped: sourceMap !== undefined }
}

const LABELS: { readonly [c in Command]: string } = {
  version: "antler --version",
  "threads-list": `antler threads list (${threadCount} threads)`,
  run: "antler run, to its first model request"
}

const t0 = performance.now()
let result: Record<string, unknown>
try {
  for (const file of entry === "bin" ? [MAIN] : [ENTRY]) {
    if (!fs.existsSync(file)) throw new Error(`${file} is missing: build with npm run build`)
  }
  const pending: Pending = { t0: 0, firstMs: undefined, firstUs: undefined }
  const script: ScriptedChatServer.Script = () => {
    if (pending.firstMs === undefined) {
      pending.firstMs = performance.now() - pending.t0
      pending.firstUs = Number(process.hrtime.bigint() / 1000n)
    }
    return "Hello from the scripted server."
  }
  const measured = await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
    const server = yield* ScriptedChatServer.start(script)
    return yield* Effect.promise(() => measureAll(server.url, pending))
  })))
  const { runs, summary, modules, profiles, clockAligned, mapped } = measured

  const resultsDir = path.join(root, "bench", "results")
  fs.mkdirSync(resultsDir, { recursive: true })
  const suffix = entry === "bin" ? "" : `-${entry}`
  const rawFile = path.join(resultsDir, `startup-${job.command}${suffix}.cpuprofile`)
  const summaryFile = path.join(resultsDir, `startup-${job.command}${suffix}.profile.json`)
  fs.copyFileSync(profiles[0]!.file, rawFile)
  const count = modules.reduce((a, m) => a + m.modules, 0)
  const kB = modules.reduce((a, m) => a + m.kB, 0)
  const program = path.relative(root, entry === "bin" ? binRuns() : ENTRY)
  fs.writeFileSync(summaryFile, JSON.stringify({
    command: LABELS[job.command],
    entry,
    program,
    sourceMapped: mapped,
    date: new Date().toISOString(),
    loadavg: os.loadavg().map((x) => round(x, 2)),
    intervalUs: PROFILE_INTERVAL_US,
    cutAtFirstRequest: job.command === "run" ? clockAligned : undefined,
    summary,
    modulesLoaded: { count, kB, byPackage: modules }
  }, null, 2) + "\n")

  const walls = runs.map((r) => r.wallMs)
  const cpus = runs.flatMap((r) => (r.cpuMs === undefined ? [] : [r.cpuMs]))
  const firsts = runs.flatMap((r) => (r.firstRequestMs === undefined ? [] : [r.firstRequestMs]))
  result = {
    command: LABELS[job.command],
    entry,
    // what loads the program (for bin: the bundle when built, else dist/programs/main.js)
    program,
    runs: job.runs,
    wallMsMedian: round(median(walls)),
    wallMsMin: round(Math.min(...walls)),
    wallMsMax: round(Math.max(...walls)),
    wallMsRuns: walls.map((x) => round(x)),
    ...(firsts.length > 0
      ? {
        firstRequestMsMedian: round(median(firsts)),
        firstRequestMsMin: round(Math.min(...firsts)),
        firstRequestMsRuns: firsts.map((x) => round(x))
      }
      : {}),
    // user + system CPU of the whole process (for `run`, through its answer and exit)
    cpuMsMedian: cpus.length > 0 ? round(median(cpus)) : null,
    cpuMsRuns: cpus,
    ...(job.command === "threads-list" ? { threads: threadCount } : {}),
    profile: {
      raw: path.relative(root, rawFile),
      summary: path.relative(root, summaryFile),
      profiles: summary.profiles,
      cutAtFirstRequest: job.command === "run" ? clockAligned : undefined,
      sampledMs: summary.sampledMs,
      phases: summary.phases,
      sourceMapped: mapped,
      topPackages: summary.packages.slice(0, 5),
      topModules: summary.modules.slice(0, 5),
      topFunctions: summary.functions.slice(0, 5)
    },
    modulesLoaded: { count, kB, topPackages: modules.slice(0, 8) }
  }
} finally {
  fs.rmSync(home, { recursive: true, force: true })
  fs.rmSync(scratch, { recursive: true, force: true })
}
result.jobWallS = round((performance.now() - t0) / 1000, 2)
process.stdout.write(JSON.stringify(result) + "\n")
