/**
 * `npm run bench:ab`: two or more builds of Antler side by side, on the same jobs, interleaved. The machine's
 * speed drifts within an hour (see bench/README.md), so figures of two builds compare only when measured
 * together: each repetition runs every job once for every build, the builds' order rotating from one
 * repetition to the next, and the table gives each build's median over the repetitions with the spread
 * (minimum–maximum) and the ratio to the first build.
 *
 * A build is a directory holding a copy of the repository's `src/` and `bench/` compiled by
 * `tsc -p tsconfig.bench.json` (its `dist-bench/`); for the `serve` job its CLI is bundled first (its
 * `scripts/bundle-cli.mjs`, into its `dist-bench/ab-cli/`). The current checkout is a build too (`.`).
 *
 *   node dist-bench/bench/ab.js --builds with=.,without=/tmp/perf/noShapes --jobs w1,w1steady,w4,w4steady
 *     [--reps 5] [--store sqlite|memory] [--repeats n] [--callgrind] [--node-flags "..."] [--out file.json]
 *
 * Jobs (the full chain over `--store`, as bench/run.ts runs them):
 *   w1 / w1steady   200 steps, 2 warm-up runs then 5 measured; with / without the forced GC before each run
 *   w4 / w4steady   100 threads x 20 steps, 1 warm-up round then 3; with / without the forced GC before each
 *   w2len           10 steps on threads of 1, 1,000 and 2,000 messages (3 each), forced GC before each run
 *   serve           bench/serveLoad.ts against the build's CLI bundle (8 clients x 6 turns x 2 tool steps, 3 rounds)
 *
 * `--callgrind` runs each worker under `valgrind --tool=callgrind` and counts instructions instead of timing
 * (w1, w1steady, w4, w4steady; serve: the server's, per run, with 4 clients x 4 turns, 2 rounds): the
 * instructions of the measured runs (the worker zeroes the counters before
 * each and dumps them after it), per step. Counts do not depend on the machine's load; they miss what memory
 * stalls and cache misses cost, and V8 under valgrind compiles on a different schedule.
 *
 * The JSON (every repetition's figures) goes to `--out` (default bench/results/ab-<jobs>.json) and stdout.
 */
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"

const here = path.dirname(fileURLToPath(import.meta.url))
const root = path.resolve(here, "..", fs.existsSync(path.join(here, "..", "package.json")) ? "" : "..")

const option = (name: string): string | undefined => {
  const at = process.argv.indexOf(`--${name}`)
  return at >= 0 ? process.argv[at + 1] : undefined
}
const builds = (option("builds") ?? "").split(",").filter((b) => b !== "").map((spec) => {
  const at = spec.indexOf("=")
  const name = at < 0 ? spec : spec.slice(0, at)
  const dir = path.resolve(root, at < 0 ? spec : spec.slice(at + 1))
  return { name, dir }
})
if (builds.length < 1) throw new Error("--builds name=dir,name=dir is required")
const jobNames = (option("jobs") ?? "w1,w1steady,w4,w4steady").split(",")
const reps = Number(option("reps") ?? 5)
const store = option("store") ?? "sqlite"
const callgrind = process.argv.includes("--callgrind")
/** `--node-flags "--a --b"`: V8 / Node flags for every worker (e.g. a fixed GC schedule under callgrind). */
const nodeFlags = (option("node-flags") ?? "").split(" ").filter((flag) => flag !== "")

const round = (x: number, digits = 1) => Math.round(x * 10 ** digits) / 10 ** digits
const median = (xs: ReadonlyArray<number>): number => {
  const s = [...xs].sort((a, b) => a - b)
  const m = Math.floor(s.length / 2)
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2
}

type Metrics = Record<string, number>

interface Job {
  /** the worker's job, or undefined for the serve job */
  readonly worker?: Record<string, unknown>
  /** steps measured by the worker job (for instructions per step) */
  readonly steps?: number
  readonly metrics: (result: any) => Metrics
}

const w1 = (gcBeforeRun: boolean): Job => ({
  worker: { kind: "w1", chain: "full", store, steps: 200, repeats: 5, warmupRuns: 2, gcBeforeRun },
  steps: 200 * 5,
  metrics: (r) => ({ "wall µs/step": r.wallUsPerStepMedian, "cpu µs/step": r.cpuUsPerStepMedian })
})
const w4 = (gcBetweenRounds: boolean): Job => ({
  worker: { kind: "w4", chain: "full", store, threads: 100, steps: 20, repeats: 3, gcBetweenRounds },
  steps: 100 * 20 * 3,
  metrics: (r) => ({ "steps/s": r.stepsPerSecMedian, "cpu µs/step": round((r.cpuMsMedian * 1000) / 2000) })
})
const JOBS: Record<string, Job> = {
  w1: w1(true),
  w1steady: w1(false),
  w4: w4(true),
  w4steady: w4(false),
  w2len: {
    worker: { kind: "w2len", chain: "full", store, lengths: [1, 1000, 2000], steps: 11, repeats: 3 },
    metrics: (r) =>
      Object.fromEntries(r.points.map((p: any) => [`µs/step at ${p.threadLength}`, p.wallUsPerStepMedian]))
  },
  serve: {
    metrics: (r) => ({
      "runs/s": r.runsPerSecMedian,
      "server cpu ms/run": r.serverCpuMsPerRunMedian,
      "latency p50 ms": r.latencyMsP50Median
    })
  }
}
for (const name of jobNames) if (JOBS[name] === undefined) throw new Error(`unknown job ${name}`)
// `--repeats n`: the measured runs (W1) or rounds (W4) of each worker job (fewer make a callgrind run shorter)
const repeats = option("repeats")
if (repeats !== undefined) {
  for (const name of jobNames) {
    const job = JOBS[name]!
    if (job.worker === undefined || job.steps === undefined) continue
    const perRepeat = job.steps / (job.worker.repeats as number)
    JOBS[name] = { ...job, worker: { ...job.worker, repeats: Number(repeats) }, steps: perRepeat * Number(repeats) }
  }
}

const scratch = fs.mkdtempSync(path.join(os.tmpdir(), "antler-ab-"))

const lastJson = (stdout: string): any => {
  const lines = stdout.trim().split("\n")
  try {
    return JSON.parse(lines[lines.length - 1]!)
  } catch {
    return JSON.parse(stdout)
  }
}

/** The build's CLI bundle, made once per run of this script (its dist-bench/ab-cli/main.cjs). */
const bundled = new Set<string>()
const bundleOf = (dir: string): string => {
  const outdir = path.join(dir, "dist-bench", "ab-cli")
  if (!bundled.has(dir)) {
    const built = spawnSync(process.execPath, [path.join(dir, "scripts", "bundle-cli.mjs"), outdir], {
      cwd: dir,
      encoding: "utf8"
    })
    if (built.status !== 0) throw new Error(`cannot bundle ${dir}: ${built.stderr}`)
    bundled.add(dir)
  }
  return path.join(outdir, "main.cjs")
}

/**
 * Instructions callgrind counted in the measured runs of a worker job (all threads): the worker dumps the
 * counters after each measured run (BENCH_CALLGRIND), and the dumps are summed.
 */
const instructions = (dir: string, args: ReadonlyArray<string>): number => {
  const out = path.join(scratch, `callgrind.${process.hrtime.bigint()}`)
  const r = spawnSync("valgrind", ["--tool=callgrind", `--callgrind-out-file=${out}`, process.execPath, ...args], {
    cwd: dir,
    encoding: "utf8",
    env: { ...process.env, BENCH_CALLGRIND: "1" },
    maxBuffer: 64 << 20
  })
  if (r.status !== 0) throw new Error(`callgrind failed (${r.status}):\n${r.stderr.slice(-2000)}`)
  let total = 0
  let dumps = 0
  for (const file of fs.readdirSync(scratch).filter((f) => f.startsWith(path.basename(out)))) {
    const text = fs.readFileSync(path.join(scratch, file), "utf8")
    fs.rmSync(path.join(scratch, file))
    if (!/^desc: Trigger: dump measured/m.test(text)) continue
    const totals = /^totals:\s+(\d+)/m.exec(text)
    if (totals === null) throw new Error(`no totals in callgrind's dump ${file}`)
    total += Number(totals[1])
    dumps++
  }
  if (dumps === 0) throw new Error("callgrind: the worker dumped no measured run")
  return total
}

const runJob = (dir: string, name: string): Metrics => {
  const job = JOBS[name]!
  if (job.worker === undefined) {
    const out = path.join(scratch, `serve-${process.hrtime.bigint()}.json`)
    // under callgrind, a smaller load (the server runs about fifty times slower)
    const load = callgrind ? ["--clients", "4", "--turns", "4", "--rounds", "2", "--callgrind"] : ["--rounds", "3"]
    const r = spawnSync(process.execPath, [
      path.join(here, "serveLoad.js"),
      "--cli",
      bundleOf(dir),
      ...load,
      "--label",
      "ab",
      "--out",
      out
    ], { cwd: root, encoding: "utf8", maxBuffer: 64 << 20 })
    if (r.status !== 0) throw new Error(`serve load failed:\n${r.stderr.slice(-2000)}`)
    const result = JSON.parse(fs.readFileSync(out, "utf8"))
    return callgrind ? { "server instructions/run": result.serverInstructionsPerRunMedian } : job.metrics(result)
  }
  const worker = path.join(dir, "dist-bench", "bench", "worker.js")
  if (callgrind) {
    const full = instructions(dir, ["--expose-gc", ...nodeFlags, worker, JSON.stringify(job.worker)])
    return { instructions: full }
  }
  const r = spawnSync(process.execPath, ["--expose-gc", ...nodeFlags, worker, JSON.stringify(job.worker)], {
    cwd: dir,
    encoding: "utf8",
    maxBuffer: 64 << 20
  })
  if (r.status !== 0) throw new Error(`${name} failed in ${dir}:\n${r.stderr.slice(-2000)}`)
  return job.metrics(lastJson(r.stdout))
}

const load0 = os.loadavg()
const started = Date.now()
const samples: Record<string, Record<string, Array<Metrics>>> = {}
if (callgrind) {
  for (const name of jobNames) {
    const job = JOBS[name]!
    if (job.worker !== undefined && job.steps === undefined) throw new Error(`--callgrind: not for the ${name} job`)
  }
}
for (let rep = 0; rep < reps; rep++) {
  for (const name of jobNames) {
    for (let i = 0; i < builds.length; i++) {
      const build = builds[(i + rep) % builds.length]!
      const t0 = Date.now()
      process.stderr.write(`[ab] rep ${rep + 1}/${reps} ${name} ${build.name} ... `)
      let metrics = runJob(build.dir, name)
      if (callgrind && JOBS[name]!.worker !== undefined) {
        const steps = JOBS[name]!.steps!
        metrics = { "instructions/step": round(metrics.instructions! / steps, 0) }
      }
      ;((samples[name] ??= {})[build.name] ??= []).push(metrics)
      process.stderr.write(`${JSON.stringify(metrics)} (${((Date.now() - t0) / 1000).toFixed(1)}s)\n`)
    }
  }
}

// the table: per job and metric, each build's median (min–max) and its ratio to the first build's median
const table: Array<Record<string, unknown>> = []
for (const name of jobNames) {
  const first = samples[name]![builds[0]!.name]!
  for (const metric of Object.keys(first[0]!)) {
    const row: Record<string, unknown> = { job: name, metric }
    const base = median(first.map((m) => m[metric]!))
    for (const build of builds) {
      const values = samples[name]![build.name]!.map((m) => m[metric]!)
      const med = median(values)
      row[build.name] = {
        median: round(med, 1),
        min: Math.min(...values),
        max: Math.max(...values),
        ratio: round(med / base, 3)
      }
    }
    table.push(row)
  }
}
const result = {
  harness: "antler",
  job: "ab",
  meta: {
    date: new Date(started).toISOString(),
    minutes: round((Date.now() - started) / 60000),
    loadavgStart: load0.map((x) => round(x, 2)),
    loadavgEnd: os.loadavg().map((x) => round(x, 2)),
    node: process.version,
    cpus: os.cpus().length,
    store,
    reps,
    mode: callgrind ? "callgrind instructions" : "timed",
    nodeFlags,
    builds: Object.fromEntries(builds.map((b) => [b.name, b.dir]))
  },
  table,
  samples
}
const text = JSON.stringify(result, null, 2) + "\n"
const out = option("out") ?? path.join(root, "bench", "results", `ab-${jobNames.join("-")}${callgrind ? "-callgrind" : ""}.json`)
fs.mkdirSync(path.dirname(out), { recursive: true })
fs.writeFileSync(out, text)
process.stdout.write(text)
for (const row of table) {
  process.stderr.write(
    `${String(row.job).padEnd(9)} ${String(row.metric).padEnd(18)} ` +
      builds.map((b) => {
        const cell = row[b.name] as { median: number; min: number; max: number; ratio: number }
        return `${b.name} ${cell.median} (${cell.min}–${cell.max}) ×${cell.ratio}`
      }).join("   ") + "\n"
  )
}
fs.rmSync(scratch, { recursive: true, force: true })
