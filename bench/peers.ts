/**
 * `npm run bench:peers`: Antler's workloads and, in the same run, the same workloads on every peer harness
 * installed under ../shared/bench/peer-* (see its README), interleaved job by job (Antler, AI SDK, LangChain,
 * OpenAI Agents, then the next job...; the order rotates each repetition) so that the machine's load drifts
 * over all of them alike. Prints the load average at start and end, one table of medians and ratios
 * (Antler ÷ peer) on stderr, and the JSON on stdout (also written to bench/results/peers-<profile>[-<args>].json).
 *   npm run bench:peers                       # default profile (3 repetitions; minutes with LangChain)
 *   BENCH_PROFILE=quick npm run bench:peers   # smoke test, about a minute
 *   npm run bench:peers -- aisdk w1           # only these peers and/or comparisons (prefixes: w1, w4/durable)
 * BENCH_PEERS_REPS overrides the number of repetitions; BENCH_PEERS_DIR the folder holding the peers.
 * A peer that is not installed (no node_modules) is skipped with a note: install it with `npm ci` in its folder.
 */
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import type { Harness, Params, WorkerResult } from "./peersTable.js"
import {
  ANTLER,
  comparisonId,
  formatFigure,
  jobFor,
  metricsOf,
  PEERS,
  PROFILES,
  renderTable,
  summarize,
  workerEnv
} from "./peersTable.js"

const here = path.dirname(fileURLToPath(import.meta.url))
const root = path.resolve(here, "..", fs.existsSync(path.join(here, "..", "package.json")) ? "" : "..")
const profile = process.env.BENCH_PROFILE === "quick" ? "quick" : "default"
const reps = Number(process.env.BENCH_PEERS_REPS)
const params: Params = {
  ...PROFILES[profile],
  ...(Number.isInteger(reps) && reps > 0 ? { repetitions: reps } : {})
}
const filters = process.argv.slice(2)
const peersDir = path.resolve(process.env.BENCH_PEERS_DIR ?? path.join(root, "..", "shared", "bench"))
const JOB_TIMEOUT_MS = 20 * 60_000

const load = () => os.loadavg().map((x) => Math.round(x * 100) / 100)
const say = (text: string) => process.stderr.write(text)

const version = (dir: string, pkg: string): string => {
  try {
    return JSON.parse(fs.readFileSync(path.join(dir, "node_modules", pkg, "package.json"), "utf8")).version
  } catch {
    return "?"
  }
}

// ---------------------------------------------------------------------------------------------------------
// Which peers run

const harnessIds = new Set([ANTLER.id, ...PEERS.map((p) => p.id)])
const peerFilters = filters.filter((f) => harnessIds.has(f))
const comparisonFilters = filters.filter((f) => !harnessIds.has(f))
const unknownFilters = comparisonFilters.filter((f) => !params.comparisons.some((c) => comparisonId(c).startsWith(f)))
if (unknownFilters.length > 0) {
  say(`bench:peers: unknown argument(s) ${unknownFilters.join(", ")}; harnesses: ${[...harnessIds].join(", ")}; ` +
    `comparisons: ${params.comparisons.map(comparisonId).join(", ")}\n`)
  process.exit(2)
}
const comparisons = params.comparisons.filter((c) =>
  comparisonFilters.length === 0 || comparisonFilters.some((f) => comparisonId(c).startsWith(f))
)

interface PeerStatus {
  readonly folder: string
  readonly dir: string
  readonly id: string | null
  readonly status: "run" | "not installed" | "not selected" | "unknown"
  readonly note: string
  readonly versions?: { readonly [pkg: string]: string }
}

const folders = fs.existsSync(peersDir)
  ? fs.readdirSync(peersDir).filter((f) => f.startsWith("peer-") && fs.statSync(path.join(peersDir, f)).isDirectory())
  : []
const statuses: Array<PeerStatus> = folders.sort().map((folder): PeerStatus => {
  const dir = path.join(peersDir, folder)
  const peer = PEERS.find((p) => p.folder === folder)
  if (peer === undefined) {
    return { folder, dir, id: null, status: "unknown", note: `${folder}: no job mapping in bench/peersTable.ts; skipped` }
  }
  if (peerFilters.length > 0 && !peerFilters.includes(peer.id)) {
    return { folder, dir, id: peer.id, status: "not selected", note: `${peer.label}: not selected` }
  }
  if (!fs.existsSync(path.join(dir, "node_modules"))) {
    return {
      folder,
      dir,
      id: peer.id,
      status: "not installed",
      note: `${peer.label}: SKIPPED, not installed (no ${path.join(dir, "node_modules")}); install it with: ` +
        `(cd ${dir} && npm ci)`
    }
  }
  const versions = Object.fromEntries(peer.versions.map((pkg) => [pkg, version(dir, pkg)]))
  return { folder, dir, id: peer.id, status: "run", note: peer.note ?? peer.label, versions }
})
for (const peer of PEERS) {
  if (!folders.includes(peer.folder!) && (peerFilters.length === 0 || peerFilters.includes(peer.id))) {
    statuses.push({
      folder: peer.folder!,
      dir: path.join(peersDir, peer.folder!),
      id: peer.id,
      status: "not installed",
      note: `${peer.label}: SKIPPED, no folder ${path.join(peersDir, peer.folder!)}`
    })
  }
}
const active = PEERS.filter((p) => statuses.some((s) => s.id === p.id && s.status === "run"))
const harnesses: ReadonlyArray<Harness> = [ANTLER, ...active]

// ---------------------------------------------------------------------------------------------------------
// Running

const command = (harness: Harness, job: object) => {
  if (harness.folder === undefined) {
    // compiled by the npm script (tsc -p tsconfig.bench.json): Antler's worker runs as plain JavaScript
    return { cwd: root, args: ["--expose-gc", path.join(here, "worker.js"), JSON.stringify(job)] }
  }
  // each peer's own way (its README): TypeScript through tsx, from its folder
  return {
    cwd: path.join(peersDir, harness.folder),
    args: ["--expose-gc", "--import", "tsx", path.join("src", "worker.ts"), JSON.stringify(job)]
  }
}

interface Attempt {
  readonly repetition: number
  readonly loadavg1: number
  readonly seconds: number
  readonly result: WorkerResult
}

const run = (harness: Harness, job: object): WorkerResult => {
  const { args, cwd } = command(harness, job)
  const r = spawnSync(process.execPath, args, {
    cwd,
    env: workerEnv(harness, process.env),
    encoding: "utf8",
    maxBuffer: 64 << 20,
    timeout: JOB_TIMEOUT_MS
  })
  if (r.status !== 0) {
    const why = r.error ? String(r.error) : `exit ${r.status ?? r.signal}`
    return { error: `${why}\n${(r.stderr || "").split("\n").slice(-12).join("\n")}` }
  }
  const lines = r.stdout.trim().split("\n")
  try {
    return JSON.parse(lines[lines.length - 1]!) as WorkerResult
  } catch {
    return { error: `no JSON on the last line of stdout:\n${r.stdout.slice(-2000)}` }
  }
}

const t0 = Date.now()
const loadStart = load()
say(`bench:peers (${profile}): ${os.cpus().length} cores, load average ${loadStart.join(" ")} (1, 5, 15 min) at start\n`)
for (const s of statuses) say(`  ${s.note}\n`)
say(`  running: ${harnesses.map((h) => h.label).join(", ")}; ${params.repetitions} repetition(s) of ` +
  `${comparisons.map(comparisonId).join(", ")}\n`)
if (profile === "quick") say("  quick: a smoke test (short runs, little warm-up): quote the default profile's figures\n")

const collected: Record<string, Record<string, Array<WorkerResult>>> = {}
const attempts: Record<string, Record<string, Array<Attempt>>> = {}
let failed = false
for (let rep = 0; rep < params.repetitions; rep++) {
  // rotate the order each repetition, so that no harness always runs first (or right after the slowest)
  const order = harnesses.map((_, i) => harnesses[(i + rep) % harnesses.length]!)
  for (const comparison of comparisons) {
    const id = comparisonId(comparison)
    for (const harness of order) {
      const job = jobFor(harness, comparison, params, profile === "quick")
      const config = harness.configs[comparison.variant].name
      const loadavg1 = load()[0]!
      say(`[${rep + 1}/${params.repetitions}] ${id} ${harness.label} (${config}) ... `)
      const started = Date.now()
      const result = run(harness, job)
      const seconds = Math.round((Date.now() - started) / 100) / 10
      const headline = metricsOf(comparison.workload, params)[0]!
      if (result.error !== undefined) {
        failed = true
        say(`FAILED (${seconds}s)\n${result.error}\n`)
      } else {
        say(`${seconds}s  ${formatFigure(headline.read(result))} ${headline.unit}\n`)
      }
      ;((collected[id] ??= {})[harness.id] ??= []).push(result)
      ;((attempts[id] ??= {})[harness.id] ??= []).push({ repetition: rep + 1, loadavg1, seconds, result })
    }
  }
}
const loadEnd = load()
const totalSeconds = Math.round((Date.now() - t0) / 100) / 10

const rows = summarize(collected, { ...params, comparisons }, active)
const out = {
  harness: "antler-vs-peers",
  profile,
  meta: {
    date: new Date(t0).toISOString(),
    node: process.version,
    cpus: os.cpus().length,
    cpuModel: os.cpus()[0]?.model,
    memGiB: Math.round(os.totalmem() / 2 ** 30),
    loadavgStart: loadStart,
    loadavgEnd: loadEnd,
    totalSeconds,
    params: { ...params, comparisons: comparisons.map(comparisonId) },
    order: "per repetition, each comparison runs on every harness in turn; the order rotates each repetition",
    median: "each worker reports its own median over its runs; the figures here are the medians across repetitions",
    ratio: "Antler ÷ peer (for µs lower is better, for steps/s higher is better; antlerFaster says which way)",
    harnesses: [
      {
        id: ANTLER.id,
        configs: ANTLER.configs,
        versions: Object.fromEntries(ANTLER.versions.map((pkg) => [pkg, version(root, pkg)]))
      },
      ...statuses.map((s) => {
        const peer = PEERS.find((p) => p.id === s.id)
        return { id: s.id, folder: s.folder, status: s.status, note: s.note, configs: peer?.configs, versions: s.versions }
      })
    ]
  },
  summary: rows,
  attempts
}
process.stdout.write(JSON.stringify(out, null, 2) + "\n")
const resultsDir = path.join(root, "bench", "results")
fs.mkdirSync(resultsDir, { recursive: true })
// a run of some peers or comparisons only does not overwrite the file of a whole run
const suffix = filters.length > 0 ? `-${filters.join("-").replace(/[^A-Za-z0-9-]/g, "_")}` : ""
const file = path.join(resultsDir, `peers-${profile}${suffix}.json`)
fs.writeFileSync(file, JSON.stringify(out, null, 2) + "\n")

say(`\nbench:peers (${profile}) — ${out.meta.date} — node ${process.version}, ${os.cpus().length} cores, ` +
  `${params.repetitions} repetition(s), ${totalSeconds} s\n`)
say(`load average (1, 5, 15 min): ${loadStart.join(" ")} at start, ${loadEnd.join(" ")} at end\n`)
say(renderTable(rows, harnesses))
say("\n")
for (const s of statuses) say(`  ${s.note}\n`)
say(`  JSON: ${path.relative(process.cwd(), file)}\n`)
if (failed) process.exitCode = 1
