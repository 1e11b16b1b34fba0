/**
 * The pure half of `npm run bench:peers`: the job each harness's worker is given, medians across
 * repetitions, ratios (Antler ÷ peer) and which way they point, and the table.
 */
import { assert, describe, it } from "@effect/vitest"
import type { Collected, Params, WorkerResult } from "../../bench/peersTable.js"
import * as T from "../../bench/peersTable.js"

const peer = (id: string) => T.PEERS.find((p) => p.id === id)!

const params: Params = {
  ...T.PROFILES.default,
  comparisons: [
    { workload: "w1", variant: "durable" },
    { workload: "w2len", variant: "durable" },
    { workload: "w4", variant: "durable" }
  ]
}

describe("jobs", () => {
  it("each harness gets its own worker's job for the same workload and sizes", () => {
    const w1 = { workload: "w1", variant: "durable" } as const
    assert.deepStrictEqual(T.jobFor(T.ANTLER, w1, params, false), {
      kind: "w1", chain: "full", store: "sqlite", steps: 200, repeats: 3, warmupRuns: 2
    })
    assert.deepStrictEqual(T.jobFor(peer("aisdk"), w1, params, false), {
      kind: "w1", middleware: "deerflow", persist: "file", steps: 200, repeats: 3, warmupRuns: 3
    })
    assert.deepStrictEqual(T.jobFor(peer("langchain"), { workload: "w1", variant: "memory" }, params, false), {
      kind: "w1", middleware: "deerflow", cp: "memory", tuned: true, steps: 200, repeats: 3, warmupSteps: 30
    })
    // LangChain's and OpenAI Agents' W2 jobs run once per length: they take no `repeats`
    assert.deepStrictEqual(T.jobFor(peer("openai-agents"), { workload: "w2len", variant: "durable" }, params, false), {
      kind: "w2len", middleware: "guarded", session: "memory", lengths: [1, 1000, 2000], steps: 11
    })
    assert.deepStrictEqual(T.jobFor(T.ANTLER, { workload: "w4", variant: "memory" }, params, true), {
      kind: "w4", chain: "full", store: "memory", threads: 100, steps: 20, repeats: 1
    })
  })

  it("a peer's worker runs without tracing switches or credentials from the caller's environment", () => {
    const env = T.workerEnv(peer("langchain"), { PATH: "/bin", LANGSMITH_API_KEY: "secret", LANGCHAIN_TRACING_V2: "true" })
    assert.deepStrictEqual(env, { PATH: "/bin", LANGSMITH_TRACING: "false", LANGCHAIN_TRACING_V2: "false" })
    const openai = T.workerEnv(peer("openai-agents"), { OPENAI_API_KEY: "sk-x", DEBUG: "*", HOME: "/root" })
    assert.deepStrictEqual(openai, { HOME: "/root", OPENAI_AGENTS_DISABLE_TRACING: "1" })
  })
})

describe("figures", () => {
  it("median of the repetitions that gave a figure", () => {
    assert.strictEqual(T.median([3, 1, 2]), 2)
    assert.strictEqual(T.median([4, 1, 3, 2]), 2.5)
    assert.strictEqual(T.median([5, undefined, 1]), 3)
    assert.strictEqual(T.median([undefined]), undefined)
  })

  it("ratio is Antler ÷ peer; how much faster reads a time and a throughput each the right way", () => {
    assert.strictEqual(T.ratio(200, 1000), 0.2)
    assert.strictEqual(T.speedup(200, 1000, "lower"), 5)
    assert.strictEqual(T.speedup(10_000, 2_500, "higher"), 4)
    assert.strictEqual(T.speedup(1000, 500, "lower"), 0.5)
    assert.strictEqual(T.ratio(1, 0), undefined)
    assert.strictEqual(T.ratio(undefined, 3), undefined)
    assert.strictEqual(T.formatSpeedup(5), "5.00× faster")
    assert.strictEqual(T.formatSpeedup(0.5), "2.00× slower")
    assert.strictEqual(T.formatSpeedup(1.5, ["flatter", "steeper"]), "1.50× flatter")
    assert.strictEqual(T.formatFigure(12_345.6), "12,346")
  })

  it("summarises medians across repetitions per figure and peer, skipping failed runs and absent peers", () => {
    const w1 = (us: number): WorkerResult => ({ wallUsPerStepMedian: us, cpuUsPerStepMedian: us / 2 })
    const w2 = (first: number, last: number): WorkerResult => ({
      points: [{ threadLength: 1, wallUsPerStepMedian: first }, { threadLength: 1000, wallUsPerStepMedian: 0 },
        { threadLength: 2000, wallUsPerStepMedian: last }],
      growthLastOverFirst: last / first
    })
    const collected: Collected = {
      "w1/durable": {
        antler: [w1(300), w1(200), w1(250)],
        aisdk: [w1(1000), { error: "exit 1" }, w1(1200)]
      },
      "w2len/durable": { antler: [w2(200, 240)], aisdk: [w2(300, 1200)] },
      "w4/durable": { antler: [{ stepsPerSecMedian: 5000 }], aisdk: [{ stepsPerSecMedian: 2500 }] }
    }
    const rows = T.summarize(collected, params, [peer("aisdk"), peer("langchain")])
    // LangChain has no results: no rows for it
    assert.isTrue(rows.every((r) => r.peer === "aisdk"))
    const wall = rows.find((r) => r.comparison === "w1/durable" && r.metric === "wallUsPerStep")!
    assert.deepInclude(wall, {
      antler: 250, peerValue: 1100, antlerConfig: "full+sqlite", peerConfig: "deerflow+file", samples: [3, 2]
    })
    assert.closeTo(wall.ratio!, 250 / 1100, 1e-12)
    assert.closeTo(wall.antlerFaster!, 4.4, 1e-12)
    const at2000 = rows.find((r) => r.metric === "wallUsPerStepAt2000")!
    assert.deepInclude(at2000, { antler: 240, peerValue: 1200, antlerFaster: 5 })
    const growth = rows.find((r) => r.metric === "growth")!
    assert.deepInclude(growth, { antler: 1.2, peerValue: 4 })
    const w4 = rows.find((r) => r.comparison === "w4/durable")!
    assert.deepInclude(w4, { ratio: 2, antlerFaster: 2, better: "higher" })
    assert.deepStrictEqual(rows.map((r) => r.metric), [
      "wallUsPerStep", "cpuUsPerStep", "wallUsPerStepAt2000", "wallUsPerStepAt1", "growth", "stepsPerSec"
    ])

    const table = T.renderTable(rows, [T.ANTLER, peer("aisdk")])
    const line = table.split("\n").find((l) => l.includes("µs/step") && l.includes("AI SDK (deerflow+file)"))!
    assert.match(line, /\s250\s+1,100\s+0\.23\s+4\.40× faster$/)
    assert.include(table, "W4 concurrency, durable (Antler: full+sqlite)")
    assert.match(table, /growth 1→2000 msgs.*3\.33× flatter/)
    assert.match(table, /steps\/s.*5,000\s+2,500\s+2\.00\s+2\.00× faster/)
  })
})
