/**
 * The pure half of `npm run bench:peers`: which harnesses run which configuration of which workload, the job
 * JSON each harness's worker takes, the medians across repetitions, the ratios (Antler ÷ peer) and the table.
 * The orchestrator (bench/peers.ts) only spawns processes and collects their JSON.
 */

/** The workloads compared (the contract of ../shared/bench/peer-langchain/README.md). */
export type Workload = "w1" | "w2len" | "w4"

/** Each harness's durable configuration, or its best in-memory one. */
export type Variant = "durable" | "memory"

/** One comparison: a workload in one variant, run by every harness in turn. */
export interface Comparison {
  readonly workload: Workload
  readonly variant: Variant
}

/** The sizes of one profile (the same for every harness in a run). */
export interface Params {
  /** How many times the whole round of jobs is repeated (A, B, C, A, B, C...). */
  readonly repetitions: number
  readonly w1Steps: number
  /** Measured runs per W1 job (each worker reports their median). */
  readonly w1Repeats: number
  readonly w2Lengths: ReadonlyArray<number>
  /** Steps run at each W2 length (the first is not measured: the worker takes step-to-step intervals). */
  readonly w2Steps: number
  /** Runs per W2 length, for the harnesses whose worker takes it (Antler, the AI SDK). */
  readonly w2Repeats: number
  readonly w4Threads: number
  readonly w4StepsPerThread: number
  /** Measured rounds per W4 job (after each worker's own unmeasured round). */
  readonly w4Repeats: number
  readonly comparisons: ReadonlyArray<Comparison>
}

/** The profiles: `quick` is a smoke test of about a minute; `default` gives figures worth quoting. */
export const PROFILES: { readonly [name in "quick" | "default"]: Params } = {
  quick: {
    repetitions: 1,
    w1Steps: 20,
    w1Repeats: 1,
    w2Lengths: [1, 200],
    w2Steps: 6,
    w2Repeats: 1,
    w4Threads: 10,
    w4StepsPerThread: 5,
    w4Repeats: 1,
    comparisons: [
      { workload: "w1", variant: "durable" },
      { workload: "w1", variant: "memory" },
      { workload: "w2len", variant: "durable" },
      { workload: "w4", variant: "durable" }
    ]
  },
  default: {
    repetitions: 3,
    w1Steps: 200,
    w1Repeats: 3,
    w2Lengths: [1, 1000, 2000],
    w2Steps: 11,
    w2Repeats: 2,
    w4Threads: 100,
    w4StepsPerThread: 20,
    w4Repeats: 1,
    comparisons: [
      { workload: "w1", variant: "durable" },
      { workload: "w1", variant: "memory" },
      { workload: "w2len", variant: "durable" },
      { workload: "w4", variant: "durable" },
      { workload: "w4", variant: "memory" }
    ]
  }
}

/** A harness configuration: its name in the harness's own README and the fields of its job JSON. */
export interface HarnessConfig {
  readonly name: string
  readonly fields: { readonly [key: string]: unknown }
}

/** How to run one harness's worker. */
export interface Harness {
  /** `antler`, or the peer folder's name without `peer-`. */
  readonly id: string
  readonly label: string
  /** The peer's folder under ../shared/bench (none for Antler). */
  readonly folder?: string
  readonly configs: { readonly [variant in Variant]: HarnessConfig }
  /** A note printed under the table (what a configuration is, where it differs). */
  readonly note?: string
  /** Names of the warm-up field and its value in a run of `w1Steps` steps (each harness's own default). */
  readonly w1Warmup: (steps: number, quick: boolean) => { readonly [key: string]: number }
  /** Whether the worker's W2 job takes `repeats` (runs per length). */
  readonly w2TakesRepeats: boolean
  /** Environment variables removed from (patterns) and set in the worker's environment. */
  readonly envDrop?: RegExp
  readonly envSet?: { readonly [name: string]: string }
  /** Packages whose versions the JSON records. */
  readonly versions: ReadonlyArray<string>
}

/** Antler: the lead agent's whole chain, durable in SQLite or on the in-memory store. */
export const ANTLER: Harness = {
  id: "antler",
  label: "Antler",
  configs: {
    durable: { name: "full+sqlite", fields: { chain: "full", store: "sqlite" } },
    memory: { name: "full+memory", fields: { chain: "full", store: "memory" } }
  },
  w1Warmup: (_steps, quick) => ({ warmupRuns: quick ? 1 : 2 }),
  w2TakesRepeats: true,
  versions: ["effect", "@effect/sql-sqlite-node", "better-sqlite3"]
}

/** The peers this orchestrator knows, by folder (`../shared/bench/<folder>`). */
export const PEERS: ReadonlyArray<Harness> = [
  {
    id: "aisdk",
    label: "AI SDK",
    folder: "peer-aisdk",
    configs: {
      durable: { name: "deerflow+file", fields: { middleware: "deerflow", persist: "file" } },
      memory: { name: "deerflow+memory+tuned", fields: { middleware: "deerflow", persist: "memory", tuned: true } }
    },
    note: "AI SDK: durable = the deerflow-like chain + a JSON Lines append per step (it has no checkpointer); " +
      "in memory = the same chain with an in-memory array and its two documented speed switches (+tuned)",
    w1Warmup: (_steps, quick) => ({ warmupRuns: quick ? 1 : 3 }),
    w2TakesRepeats: true,
    versions: ["ai", "@ai-sdk/provider-utils", "zod"]
  },
  {
    id: "langchain",
    label: "LangChain",
    folder: "peer-langchain",
    configs: {
      durable: { name: "deerflow+sqlite", fields: { middleware: "deerflow", cp: "sqlite" } },
      memory: { name: "deerflow+memory+tuned", fields: { middleware: "deerflow", cp: "memory", tuned: true } }
    },
    note: "LangChain: durable = createAgent with the 7 built-in middlewares + SqliteSaver; in memory = " +
      "MemorySaver with its best options (+tuned: the beta delta channel and tool node v1)",
    w1Warmup: (steps) => ({ warmupSteps: Math.min(30, steps) }),
    w2TakesRepeats: false,
    envDrop: /^(LANGCHAIN_|LANGSMITH_)/,
    envSet: { LANGSMITH_TRACING: "false", LANGCHAIN_TRACING_V2: "false" },
    versions: ["langchain", "@langchain/langgraph", "@langchain/langgraph-checkpoint-sqlite"]
  },
  {
    id: "openai-agents",
    label: "OpenAI Agents",
    folder: "peer-openai-agents",
    configs: {
      durable: { name: "guarded+session", fields: { middleware: "guarded", session: "memory" } },
      memory: { name: "guarded", fields: { middleware: "guarded", session: "none" } }
    },
    note: "OpenAI Agents: its \"durable\" row is guarded + MemorySession, an in-process session (the SDK has " +
      "no local durable store), so that row compares Antler on disk with a peer in memory",
    w1Warmup: (steps) => ({ warmupSteps: Math.min(30, steps) }),
    w2TakesRepeats: false,
    envDrop: /^(OPENAI_|DEBUG$|NODE_DEBUG$)/,
    envSet: { OPENAI_AGENTS_DISABLE_TRACING: "1" },
    versions: ["@openai/agents", "zod"]
  }
]

/** A worker's job (JSON): the workload, the harness's configuration fields and the sizes. */
export interface Job {
  readonly kind: Workload
  readonly [field: string]: unknown
}

/** The job JSON a harness's worker takes for one comparison. */
export const jobFor = (harness: Harness, comparison: Comparison, params: Params, quick: boolean): Job => {
  const config = harness.configs[comparison.variant].fields
  switch (comparison.workload) {
    case "w1":
      return {
        kind: "w1",
        ...config,
        steps: params.w1Steps,
        repeats: params.w1Repeats,
        ...harness.w1Warmup(params.w1Steps, quick)
      }
    case "w2len":
      return {
        kind: "w2len",
        ...config,
        lengths: params.w2Lengths,
        steps: params.w2Steps,
        ...(harness.w2TakesRepeats ? { repeats: params.w2Repeats } : {})
      }
    case "w4":
      return {
        kind: "w4",
        ...config,
        threads: params.w4Threads,
        steps: params.w4StepsPerThread,
        repeats: params.w4Repeats
      }
  }
}

/** A comparison's id: `w1/durable`. */
export const comparisonId = (c: Comparison): string => `${c.workload}/${c.variant}`

/** The environment of a harness's worker. */
export const workerEnv = (harness: Harness, env: NodeJS.ProcessEnv): NodeJS.ProcessEnv => {
  const out: NodeJS.ProcessEnv = {}
  for (const [name, value] of Object.entries(env)) if (!harness.envDrop?.test(name)) out[name] = value
  return { ...out, ...harness.envSet }
}

// ---------------------------------------------------------------------------------------------------------
// Figures

/** One figure a comparison reports, read from one worker result. */
export interface Metric {
  readonly key: string
  readonly label: string
  readonly unit: string
  /** Whether a lower figure is the better one (time) or a higher (throughput). */
  readonly better: "lower" | "higher"
  /** What Antler is when its figure is the better one, and when not. Default: faster, slower. */
  readonly words?: readonly [string, string]
  readonly read: (result: WorkerResult) => number | undefined
}

/** A worker's JSON (the fields read here; the rest is kept as is). */
export interface WorkerResult {
  readonly wallUsPerStepMedian?: number
  readonly cpuUsPerStepMedian?: number
  readonly stepsPerSecMedian?: number
  readonly growthLastOverFirst?: number
  readonly points?: ReadonlyArray<{ readonly threadLength: number; readonly wallUsPerStepMedian: number }>
  readonly error?: string
  readonly [key: string]: unknown
}

const finite = (x: unknown): number | undefined => (typeof x === "number" && Number.isFinite(x) ? x : undefined)

/** The figures of each workload, the first being the headline one. */
export const metricsOf = (workload: Workload, params: Params): ReadonlyArray<Metric> => {
  switch (workload) {
    case "w1":
      return [
        { key: "wallUsPerStep", label: "µs/step", unit: "µs", better: "lower", read: (r) => finite(r.wallUsPerStepMedian) },
        { key: "cpuUsPerStep", label: "cpu µs/step", unit: "µs", better: "lower", read: (r) => finite(r.cpuUsPerStepMedian) }
      ]
    case "w2len": {
      const first = params.w2Lengths[0]!
      const last = params.w2Lengths[params.w2Lengths.length - 1]!
      // the workers report one point per length, in the order asked
      const at = (end: "first" | "last") => (r: WorkerResult) =>
        finite(r.points?.[end === "first" ? 0 : r.points.length - 1]?.wallUsPerStepMedian)
      return [
        { key: `wallUsPerStepAt${last}`, label: `µs/step at ${last} msgs`, unit: "µs", better: "lower", read: at("last") },
        { key: `wallUsPerStepAt${first}`, label: `µs/step at ${first} msg`, unit: "µs", better: "lower", read: at("first") },
        {
          key: "growth",
          label: `growth ${first}→${last} msgs`,
          unit: "×",
          better: "lower",
          words: ["flatter", "steeper"],
          read: (r) => finite(r.growthLastOverFirst)
        }
      ]
    }
    case "w4":
      return [
        { key: "stepsPerSec", label: "steps/s", unit: "steps/s", better: "higher", read: (r) => finite(r.stepsPerSecMedian) }
      ]
  }
}

/** The median of the defined figures (the mean of the two middle ones for an even count); undefined if none. */
export const median = (xs: ReadonlyArray<number | undefined>): number | undefined => {
  const s = xs.filter((x): x is number => x !== undefined && Number.isFinite(x)).sort((a, b) => a - b)
  if (s.length === 0) return undefined
  const m = Math.floor(s.length / 2)
  return s.length % 2 === 1 ? s[m]! : (s[m - 1]! + s[m]!) / 2
}

/** Antler ÷ peer, or undefined when either is missing or the peer's figure is 0. */
export const ratio = (antler: number | undefined, peer: number | undefined): number | undefined =>
  antler === undefined || peer === undefined || peer === 0 ? undefined : antler / peer

/**
 * How many times faster Antler is than the peer on a figure (below 1: slower): peer ÷ Antler for a time,
 * Antler ÷ peer for a throughput.
 */
export const speedup = (antler: number | undefined, peer: number | undefined, better: Metric["better"]) => {
  const r = ratio(antler, peer)
  if (r === undefined || r === 0) return undefined
  return better === "lower" ? 1 / r : r
}

/** One line of the summary: a figure of one comparison, Antler's median beside one peer's. */
export interface SummaryRow {
  readonly comparison: string
  readonly metric: string
  readonly label: string
  readonly better: Metric["better"]
  readonly words: readonly [string, string]
  readonly peer: string
  readonly antlerConfig: string
  readonly peerConfig: string
  /** Medians across the repetitions. */
  readonly antler: number | undefined
  readonly peerValue: number | undefined
  /** Antler ÷ peer. */
  readonly ratio: number | undefined
  /** How many times faster Antler is (see `speedup`). */
  readonly antlerFaster: number | undefined
  /** Repetitions that gave a figure (Antler, peer). */
  readonly samples: readonly [number, number]
}

/** The results of a run: per comparison id, per harness id, one worker result per repetition. */
export type Collected = {
  readonly [comparison: string]: { readonly [harness: string]: ReadonlyArray<WorkerResult> }
}

/** The summary rows: every figure of every comparison, for every peer that ran. */
export const summarize = (
  collected: Collected,
  params: Params,
  peers: ReadonlyArray<Harness>
): ReadonlyArray<SummaryRow> => {
  const rows: Array<SummaryRow> = []
  for (const comparison of params.comparisons) {
    const id = comparisonId(comparison)
    const byHarness = collected[id] ?? {}
    const antlerRuns = byHarness[ANTLER.id] ?? []
    for (const metric of metricsOf(comparison.workload, params)) {
      const antlerFigures = antlerRuns.map(metric.read)
      const antler = median(antlerFigures)
      for (const peer of peers) {
        const peerRuns = byHarness[peer.id]
        if (peerRuns === undefined) continue
        const peerFigures = peerRuns.map(metric.read)
        const peerValue = median(peerFigures)
        rows.push({
          comparison: id,
          metric: metric.key,
          label: metric.label,
          better: metric.better,
          words: metric.words ?? ["faster", "slower"],
          peer: peer.id,
          antlerConfig: ANTLER.configs[comparison.variant].name,
          peerConfig: peer.configs[comparison.variant].name,
          antler,
          peerValue,
          ratio: ratio(antler, peerValue),
          antlerFaster: speedup(antler, peerValue, metric.better),
          samples: [antlerFigures.filter((x) => x !== undefined).length, peerFigures.filter((x) => x !== undefined).length]
        })
      }
    }
  }
  return rows
}

// ---------------------------------------------------------------------------------------------------------
// Table

/** A figure for the table: thousands separated; two decimals below 10, one below 100, none above. */
export const formatFigure = (x: number | undefined): string => {
  if (x === undefined) return "-"
  const digits = Math.abs(x) >= 100 ? 0 : Math.abs(x) >= 10 ? 1 : 2
  return x.toLocaleString("en-US", { minimumFractionDigits: digits, maximumFractionDigits: digits })
}

/** `5.1× faster`, `1.3× slower` (or the metric's own words), or `-`. */
export const formatSpeedup = (
  x: number | undefined,
  words: readonly [string, string] = ["faster", "slower"]
): string => {
  if (x === undefined) return "-"
  return x >= 1 ? `${formatFigure(x)}× ${words[0]}` : `${formatFigure(1 / x)}× ${words[1]}`
}

const COMPARISON_TITLES: { readonly [id: string]: string } = {
  "w1/durable": "W1 per step, durable",
  "w1/memory": "W1 per step, in memory",
  "w2len/durable": "W2 by thread length, durable",
  "w2len/memory": "W2 by thread length, in memory",
  "w4/durable": "W4 concurrency, durable",
  "w4/memory": "W4 concurrency, in memory"
}

const pad = (s: string, n: number) => (s.length >= n ? s : s + " ".repeat(n - s.length))
const lpad = (s: string, n: number) => (s.length >= n ? s : " ".repeat(n - s.length) + s)

/** The human table: one line per figure and peer, Antler's median, the peer's, the ratio and what it means. */
export const renderTable = (rows: ReadonlyArray<SummaryRow>, peers: ReadonlyArray<Harness>): string => {
  const label = (id: string) => peers.find((p) => p.id === id)?.label ?? id
  const lines: Array<string> = []
  const header = `  ${pad("figure", 24)}${pad("peer (its config)", 38)}${lpad("Antler", 10)}${lpad("peer", 12)}` +
    `${lpad("Antler ÷ peer", 15)}  Antler is`
  let current = ""
  for (const row of rows) {
    if (row.comparison !== current) {
      current = row.comparison
      lines.push("", `${COMPARISON_TITLES[row.comparison] ?? row.comparison} (Antler: ${row.antlerConfig})`, header)
    }
    const ratioText = row.ratio === undefined ? "-" : row.ratio < 0.01 ? row.ratio.toExponential(1) : formatFigure(row.ratio)
    lines.push(
      `  ${pad(row.label, 24)}${pad(`${label(row.peer)} (${row.peerConfig})`, 38)}${lpad(formatFigure(row.antler), 10)}` +
        `${lpad(formatFigure(row.peerValue), 12)}${lpad(ratioText, 15)}  ${formatSpeedup(row.antlerFaster, row.words)}`
    )
  }
  return lines.join("\n") + "\n"
}
