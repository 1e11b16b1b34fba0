/**
 * The benchmark orchestrator: runs every job in its own Node process, prints one JSON object on stdout and a
 * human table on stderr. Same workloads and JSON shape as the peer harnesses in ../shared/bench/.
 *   npm run bench                       # default profile
 *   BENCH_PROFILE=quick npm run bench   # smoke test
 *   npm run bench -- w1 w4              # only jobs whose id starts with one of the arguments
 */
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"

const here = path.dirname(fileURLToPath(import.meta.url))
const root = path.resolve(here, "..", fs.existsSync(path.join(here, "..", "package.json")) ? "" : "..")
const profile = (process.env.BENCH_PROFILE ?? "default") as "quick" | "default"
const only = process.argv.slice(2)

const P = {
  quick: {
    n: 30, rep: 2, warm: 1, warmLong: 3, lengths: [1, 200], lenSteps: 6, lenRep: 1, grow: 200, threads: 20, tSteps: 5,
    w4rep: 1, startupRuns: 3, startupProfiles: 1
  },
  default: {
    n: 200, rep: 5, warm: 2, warmLong: 40, lengths: [1, 1000, 2000], lenSteps: 11, lenRep: 3, grow: 2000, threads: 100,
    tSteps: 20, w4rep: 3, startupRuns: 10, startupProfiles: 3
  }
}[profile]

type Cfg = { chain: "bare" | "full"; store: "memory" | "sqlite" }
const name = (c: Cfg) => `${c.chain}+${c.store}`
const configs: Array<Cfg> = [
  { chain: "bare", store: "memory" },
  { chain: "full", store: "memory" },
  { chain: "full", store: "sqlite" }
]
const jobs: Array<{ id: string; job: Record<string, unknown> | null; script?: string }> = []
// W1 also runs the loop alone over SQLite: the durable floor, for the ratio full+sqlite ÷ bare+sqlite in one run
const W1_CONFIGS: Array<Cfg> = [configs[0]!, { chain: "bare", store: "sqlite" }, ...configs.slice(1)]
for (const c of W1_CONFIGS) {
  jobs.push({ id: `w1/${name(c)}`, job: { kind: "w1", ...c, steps: P.n, repeats: P.rep, warmupRuns: P.warm } })
}
// The same after a long warm-up: V8 takes thousands of steps to optimise the chain fully (see bench/README.md).
for (const c of configs.slice(1)) {
  jobs.push({ id: `w1warm/${name(c)}`, job: { kind: "w1", ...c, steps: P.n, repeats: P.rep, warmupRuns: P.warmLong } })
}
// W1 again without the full GC the contract forces before each run (not a peer figure): runs back to back, as an
// app or a busy server runs them
for (const c of configs.slice(1)) {
  jobs.push({
    id: `w1steady/${name(c)}`,
    job: { kind: "w1", ...c, steps: P.n, repeats: P.rep, warmupRuns: P.warm, gcBeforeRun: false }
  })
}
for (const c of configs) {
  jobs.push({ id: `w2len/${name(c)}`, job: { kind: "w2len", ...c, lengths: P.lengths, steps: P.lenSteps, repeats: P.lenRep } })
}
for (const c of configs) jobs.push({ id: `w2grow/${name(c)}`, job: { kind: "w2grow", ...c, messages: P.grow } })
// W3 again with the program in one bundle, as `antler` runs it (dist/cli/ is built the same way): the heap kept
// is mostly program code, and the bundle holds less of it (tree-shaken, without the comments of the sources)
const W3_BUNDLED: Cfg = { chain: "full", store: "sqlite" }
jobs.push({
  id: `w2grow-bundled/${name(W3_BUNDLED)}`,
  job: { kind: "w2grow", ...W3_BUNDLED, messages: P.grow },
  script: "worker.bundle.mjs"
})
// W4 also runs the loop alone over SQLite: the durable floor under the same contract
const W4_CONFIGS: Array<Cfg> = [configs[0]!, { chain: "bare", store: "sqlite" }, ...configs.slice(1)]
for (const c of W4_CONFIGS) {
  jobs.push({ id: `w4/${name(c)}`, job: { kind: "w4", ...c, threads: P.threads, steps: P.tSteps, repeats: P.w4rep } })
}
// W4 again without the full GC the contract forces before each round (not a peer figure: the peers' harnesses
// force it): a round right after a forced GC runs while V8 optimises the chain's code again
for (const c of configs.slice(1)) {
  jobs.push({
    id: `w4steady/${name(c)}`,
    job: { kind: "w4", ...c, threads: P.threads, steps: P.tSteps, repeats: P.w4rep, gcBetweenRounds: false }
  })
}
jobs.push({ id: "summarization-check", job: null, script: "summarization-check.js" })
// start-up of the CLI as users run it (node bin/antler.js: the bundle dist/cli/), each with CPU profiles
// (bench/startup.ts); then the same commands from the unbundled dist/programs/main.js, what bin/antler.js falls
// back to without the bundle
const STARTUP_COMMANDS = ["version", "threads-list", "run"]
for (const entry of ["bin", "compiled"]) {
  for (const command of STARTUP_COMMANDS) {
    jobs.push({
      id: entry === "bin" ? `startup/${command}` : `startup/${entry}/${command}`,
      job: { kind: "startup", command, entry, runs: P.startupRuns, profiles: P.startupProfiles, threads: 100 },
      script: "startup.js"
    })
  }
}

const selected = only.length ? jobs.filter((j) => only.some((o) => j.id.startsWith(o))) : jobs
const version = (pkg: string) => {
  try {
    return JSON.parse(fs.readFileSync(path.join(root, "node_modules", pkg, "package.json"), "utf8")).version
  } catch {
    return "?"
  }
}

/**
 * Builds dist/ (what bin/antler.js runs: the bundle dist/cli/, over the compiled dist/programs/) when either is
 * missing or older than a source file, as `npm run build` does.
 */
const ensureBuilt = () => {
  const newest = (dir: string): number =>
    fs.readdirSync(dir, { withFileTypes: true }).reduce((latest, entry) => {
      const file = path.join(dir, entry.name)
      return Math.max(latest, entry.isDirectory() ? newest(file) : fs.statSync(file).mtimeMs)
    }, 0)
  const sources = newest(path.join(root, "src"))
  const fresh = (file: string) => fs.existsSync(file) && fs.statSync(file).mtimeMs >= sources
  const steps: Array<[string, Array<string>]> = []
  if (!fresh(path.join(root, "dist", "programs", "main.js"))) {
    steps.push(["dist/ (tsc)", [path.join(root, "node_modules", "typescript", "bin", "tsc"), "-p", "tsconfig.build.json"]])
  }
  // with its source map, which the start-up jobs read to say which module a profiled frame came from
  const bundle = path.join(root, "dist", "cli", "main.cjs")
  if (steps.length > 0 || !fresh(bundle) || !fs.existsSync(`${bundle}.map`)) {
    steps.push(["dist/cli/ (the bundle)", [path.join(root, "scripts", "bundle-cli.mjs"), "--sourcemap"]])
  }
  for (const [what, args] of steps) {
    process.stderr.write(`[bench] building ${what} for the start-up jobs ... `)
    const r = spawnSync(process.execPath, args, { cwd: root, encoding: "utf8" })
    if (r.status !== 0) throw new Error(`the build failed:\n${r.stdout}${r.stderr}`)
    process.stderr.write("done\n")
  }
}

/**
 * bench/worker.ts in one ES module (esbuild, the packages bundle-cli.mjs leaves out left out too), beside the
 * compiled worker; without esbuild the bundled jobs fail saying so.
 */
const bundleWorker = async () => {
  const esbuild = await import("esbuild")
  const { external } = await import(pathToFileURL(path.join(root, "scripts", "bundle-externals.mjs")).href)
  await esbuild.build({
    absWorkingDir: root,
    entryPoints: ["bench/worker.ts"],
    outfile: path.join(here, "worker.bundle.mjs"),
    bundle: true,
    format: "esm",
    platform: "node",
    target: "node20",
    external: external(),
    // what the CommonJS packages inside the bundle require
    banner: { js: `import { createRequire as __antlerRequire } from "node:module"; const require = __antlerRequire(import.meta.url);` },
    logLevel: "warning"
  })
}

const t0 = Date.now()
const load0 = os.loadavg()
process.stderr.write(`[bench] ${profile}: ${os.cpus().length} cores, load average ${load0.map((x) => x.toFixed(2)).join(" ")}\n`)
if (selected.some((j) => j.id.startsWith("startup/"))) ensureBuilt()
if (selected.some((j) => j.script === "worker.bundle.mjs")) {
  process.stderr.write("[bench] bundling the worker ... ")
  await bundleWorker()
  process.stderr.write("done\n")
}
const results: Record<string, any> = {}
for (const spec of selected) {
  const started = Date.now()
  process.stderr.write(`[bench] ${spec.id} ... `)
  // compiled by `npm run bench` (tsc -p tsconfig.bench.json): the workers run plain JavaScript, as users do
  const args = [
    "--expose-gc",
    path.join(here, spec.script ?? "worker.js"),
    ...(spec.job === null ? [] : [JSON.stringify(spec.job)])
  ]
  const r = spawnSync(process.execPath, args, { cwd: root, env: process.env, encoding: "utf8", maxBuffer: 64 << 20 })
  const secs = ((Date.now() - started) / 1000).toFixed(1)
  if (r.status !== 0) {
    process.stderr.write(`FAILED (${secs}s)\n${r.stderr}\n`)
    results[spec.id] = { error: (r.stderr || "").split("\n").slice(-12).join("\n") }
    continue
  }
  process.stderr.write(`${secs}s\n`)
  const lines = r.stdout.trim().split("\n")
  let parsed: unknown
  try {
    parsed = JSON.parse(lines[lines.length - 1]!)
  } catch {
    parsed = JSON.parse(r.stdout)
  }
  results[spec.id] = parsed
}

const out = {
  harness: "antler",
  profile,
  meta: {
    date: new Date(t0).toISOString(),
    node: process.version,
    cpus: os.cpus().length,
    cpuModel: os.cpus()[0]?.model,
    memGiB: Math.round(os.totalmem() / 2 ** 30),
    loadavgStart: load0.map((x) => Math.round(x * 100) / 100),
    loadavgEnd: os.loadavg().map((x) => Math.round(x * 100) / 100),
    totalSeconds: Math.round((Date.now() - t0) / 100) / 10,
    versions: Object.fromEntries(["effect", "@effect/sql-sqlite-node", "better-sqlite3", "gpt-tokenizer"].map((p) => [p, version(p)])),
    workload: {
      step: "1 model turn returning 1 read_file tool call + its execution (2 messages appended); final turn returns text",
      toolOutputChars: 100,
      w1Steps: P.n,
      w2Lengths: P.lengths,
      w2StepsPerPoint: P.lenSteps - 1,
      w4: `${P.threads} threads x ${P.tSteps} steps`,
      chains: {
        bare: "the loop over the base model and tool, no middleware",
        full: "LeadAgent's whole chain with every guard on (summarisation checking on every call, never firing)"
      },
      stores: { memory: "in-memory ThreadStore", sqlite: "SQLite ThreadStore: every step written as one checkpoint (WAL)" }
    }
  },
  results
}
process.stdout.write(JSON.stringify(out, null, 2) + "\n")
// also kept on disk (stdout of `npm run bench` starts with npm's own banner; `npm run -s bench` has none)
const resultsDir = path.join(root, "bench", "results")
fs.mkdirSync(resultsDir, { recursive: true })
// a run of some jobs only does not overwrite the file of a whole run (as bench:peers names its files)
const suffix = only.length > 0 ? `-${only.join("-").replace(/[^A-Za-z0-9-]/g, "_")}` : ""
fs.writeFileSync(path.join(resultsDir, `antler-${profile}${suffix}.json`), JSON.stringify(out, null, 2) + "\n")

// human summary
const line = (...cols: Array<string | number>) => process.stderr.write(cols.map(String).join("  ") + "\n")
line("\nW1 µs/step (N=" + P.n + ")      wall    cpu    checkpoint µs   serialized B/step   on-disk B/step")
for (const c of W1_CONFIGS) {
  const r = results[`w1/${name(c)}`]
  if (r && !r.error) {
    line(name(c).padEnd(18), r.wallUsPerStepMedian, r.cpuUsPerStepMedian, r.checkpointUsPerStepMedian, r.serializedBytesPerStep, r.checkpointBytesPerStep ?? "-")
  }
  const warm = results[`w1warm/${name(c)}`]
  if (warm && !warm.error) line(`  after ${P.warmLong} warm-up runs`.padEnd(18), warm.wallUsPerStepMedian, warm.cpuUsPerStepMedian, warm.checkpointUsPerStepMedian)
  const steady = results[`w1steady/${name(c)}`]
  if (steady && !steady.error) line("  no forced GC".padEnd(18), steady.wallUsPerStepMedian, steady.cpuUsPerStepMedian, steady.checkpointUsPerStepMedian)
}
const durableFull = results["w1/full+sqlite"]
const durableBare = results["w1/bare+sqlite"]
if (durableFull && !durableFull.error && durableBare && !durableBare.error) {
  const ratio = (a: number, b: number) => (a / b).toFixed(2)
  line("full+sqlite ÷ bare+sqlite: wall ×" + ratio(durableFull.wallUsPerStepMedian, durableBare.wallUsPerStepMedian) +
    ", cpu ×" + ratio(durableFull.cpuUsPerStepMedian, durableBare.cpuUsPerStepMedian))
}
line("\nW2 µs/step by thread length   " + P.lengths.join(" / ") + "   growth")
for (const c of configs) {
  const r = results[`w2len/${name(c)}`]
  if (r && !r.error) line(name(c).padEnd(18), r.points.map((p: any) => p.wallUsPerStepMedian).join(" / "), "x" + r.growthLastOverFirst)
}
line("\nW3 memory (grow to " + P.grow + " msgs)   peak RSS MiB   heap kept MiB")
for (const c of configs) {
  const r = results[`w2grow/${name(c)}`]
  if (r && !r.error) line(name(c).padEnd(18), r.memory.peakRssMiB, r.memory.heapRetainedAfterGcMiB)
}
const bundled = results[`w2grow-bundled/${name(W3_BUNDLED)}`]
if (bundled && !bundled.error) line(`${name(W3_BUNDLED)}, bundled`.padEnd(18), bundled.memory.peakRssMiB, bundled.memory.heapRetainedAfterGcMiB)
line("\nW4 " + P.threads + " threads x " + P.tSteps + " steps     steps/s   wall ms")
for (const c of W4_CONFIGS) {
  const r = results[`w4/${name(c)}`]
  if (r && !r.error) line(name(c).padEnd(18), r.stepsPerSecMedian, r.wallMsMedian)
  const steady = results[`w4steady/${name(c)}`]
  if (steady && !steady.error) line("  no forced GC".padEnd(18), steady.stepsPerSecMedian, steady.wallMsMedian)
}
for (const [id, title] of [["startup", "node bin/antler.js"], ["startup/compiled", "node dist/programs/main.js"]]) {
  line(`\nStart-up, ${title} (${P.startupRuns} runs)`.padEnd(41), "wall ms median (min)   first request ms   cpu ms")
  for (const command of STARTUP_COMMANDS) {
    const r = results[`${id}/${command}`]
    if (r && !r.error) {
      line(r.command.padEnd(40), `${r.wallMsMedian} (${r.wallMsMin})`.padEnd(22), String(r.firstRequestMsMedian ?? "-").padEnd(16), r.cpuMsMedian ?? "-")
      const phases = r.profile.phases
      line("  profile ms: load", phases.load, "evaluate", phases.evaluate, "run", phases.run, "node", phases.node, "gc", phases.gc, `(${r.profile.summary})`)
      line("  costliest to evaluate:", r.profile.topPackages.map((p: any) => `${p.package} ${p.evaluateMs}+${p.runMs}`).join(", "))
      line(`  loads ${r.modulesLoaded.count} modules, ${r.modulesLoaded.kB} kB:`, r.modulesLoaded.topPackages.slice(0, 5).map((p: any) => `${p.package} ${p.modules}/${p.kB} kB`).join(", "))
    }
  }
}
process.stderr.write(`\nload average ${load0.map((x) => x.toFixed(2)).join(" ")} at start, ${os.loadavg().map((x) => x.toFixed(2)).join(" ")} at end\n`)
if (Object.values(results).some((r: any) => r.error)) process.exitCode = 1
