/**
 * `npm run bench:gateway`: `antler serve` beside LangGraph's own JavaScript API server (`langgraphjs dev`, which
 * runs `@langchain/langgraph-api`), in the same run, interleaved, driven by the same client
 * (`@langchain/langgraph-sdk`) against the same loopback model (bench/gatewayModel.ts: Chat Completions, one
 * chunk per token, each token's send time kept). A run is 5 steps: 4 tool calls (write_file, read_file
 * alternately), then an answer of 200 tokens, streamed with stream modes `values` and `messages-tuple`.
 *
 * - G1 latency: one streamed run at a time, the servers alternating run by run, each warmed first by 10 runs
 *   (`--warm N`): the time each answer token adds between the model server writing it and the client reading it
 *   (p50, p99), and the time to the first event.
 * - G2 load: 10, 100 and 500 concurrent streamed runs (a thread each), the servers alternating level by level; a level
 *   of fewer than 50 runs runs again, one round after another, until it has run 50 (`--min-runs`; memory is the first
 *   round's):
 *   steps per second, CPU-seconds per 1,000 steps of the server's process tree (/proc), p99 added latency per
 *   token, and resident memory per active run (the peak during the level less the level's start, over N). Each
 *   level runs on a fresh server process warmed by 10 runs one at a time (`--warm N`), so that its memory per run
 *   is not hidden by a heap the levels before had grown, and starts once every server is back to its idle CPU
 *   (`quiet`, at most a minute; G3 too). The bench's own process (the client and the model) is measured too: its
 *   share of a core and its event loop's delay, the part of the latencies that is the client's.
 * - The floor (bench/gatewayFloor.ts), a bare relay with no framework, runs in G1 and G2 as one more server: what
 *   the client, the loopback and the model's stream cost, below which no server measures.
 * - G3 reconnects: 500 clients each start a resumable run, drop the stream after 50 of its answer tokens, and
 *   rejoin with `Last-Event-ID`: answer tokens lost or repeated (must be 0), the time from the rejoin to its
 *   response's headers and to its first event, and the requests that failed and that the SDK retried (after 1-2 s,
 *   2-4 s, 4-8 s: part of the time to resume). The JSON keeps the ten slowest rejoins.
 *
 * Each measurement (a G1 run, a G2 level, a G3 round) runs with the other servers stopped (SIGSTOP): one server
 * on the 2 cores at a time.
 *
 * The peer runs a LangChain `createAgent` graph with the same tools, its summarisation and tool-call-limit
 * middlewares, in memory (bench/peer-langgraph-server, installed with `npm ci` there on first use). Antler runs
 * its full lead chain on SQLite (`antler serve`'s default) and, for the like-for-like row, on memory (the same
 * gateway layer with `MemoryThreadStore`: bench/gatewayMemoryServer.ts). Prints the load average, a table of figures and
 * ratios (Antler ÷ LangGraph) on stderr, the JSON on stdout and in bench/results/gateway-<profile>.json.
 *
 *   npm run bench:gateway                       # default profile
 *   BENCH_PROFILE=quick npm run bench:gateway   # smoke test, about a minute
 *   node dist-bench/bench/gatewayLoad.js [--only antler|antler-memory|langgraph[,...]] [--cli path/main.cjs] [--cpu-prof dir]
 *     [--levels 10,100] [--min-runs 50] [--g1 20] [--g3 500] [--warm 10] [--skip g1,g2,g3] [--node-arg --a-node-flag]...
 *     [--max-active-runs N] [--kept]
 *
 * `--kept` runs each G2 level again on fresh servers that collect their garbage in full every 200 ms
 * (bench/keptProbe.cjs): the heap each server keeps per active run, beside the RSS (which includes the garbage a
 * collector leaves until it needs the room). It costs the servers CPU: memory only.
 * `--cpu-prof dir` runs `antler serve` under `node --cpu-prof --cpu-prof-dir dir` (see bench/README.md).
 * `--node-arg --require=$PWD/bench/serverProbe.cjs` loads a probe into the Antler servers: where a slow request
 * waited (the server's event loop, and each rejoin from its `request` event to its headers).
 */
import { Client } from "@langchain/langgraph-sdk"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { monitorEventLoopDelay } from "node:perf_hooks"
import { setTimeout as sleep } from "node:timers/promises"
import { fileURLToPath } from "node:url"
import type { ModelServer } from "./gatewayModel.js"
import { startModel, TOKEN } from "./gatewayModel.js"
import type { Server } from "./gatewayServers.js"
import {
  alone,
  antlerCli,
  ensurePeer,
  PEER_DIR,
  peerVersions,
  startAntler,
  startAntlerMemory,
  startFloor,
  startPeer,
  tree,
  usageOf
} from "./gatewayServers.js"

const here = path.dirname(fileURLToPath(import.meta.url))
const root = path.resolve(here, "..", fs.existsSync(path.join(here, "..", "package.json")) ? "" : "..")
const profile = process.env.BENCH_PROFILE === "quick" ? "quick" : "default"
const option = (name: string): string | undefined => {
  const at = process.argv.indexOf(`--${name}`)
  return at >= 0 ? process.argv[at + 1] : undefined
}
const numbers = (text: string | undefined, fallback: ReadonlyArray<number>) => {
  if (text === undefined) return fallback
  const ns = text.split(",").map(Number)
  if (ns.some((n) => !Number.isInteger(n) || n <= 0) || new Set(ns).size !== ns.length) {
    throw new Error(`expected distinct whole numbers, got ${text}`)
  }
  return ns
}

const PROFILES = {
  quick: { g1Runs: 6, levels: [10, 50], g3Clients: 50, minRuns: 10 },
  default: { g1Runs: 20, levels: [10, 100, 500], g3Clients: 500, minRuns: 50 }
} as const
const params = {
  toolSteps: 4,
  answerTokens: 200,
  tokenIntervalMs: 2,
  dropAfterTokens: 50,
  /** runs one at a time on each G2 level's fresh server before the level is measured */
  warmRuns: numbers(option("warm"), [10])[0]!,
  g1Runs: numbers(option("g1"), [PROFILES[profile].g1Runs])[0]!,
  levels: numbers(option("levels"), PROFILES[profile].levels),
  g3Clients: numbers(option("g3"), [PROFILES[profile].g3Clients])[0]!,
  /** a G2 level runs rounds of its concurrent runs until it has run at least this many (`roundsOf`) */
  minRuns: numbers(option("min-runs"), [PROFILES[profile].minRuns])[0]!
}
/**
 * Rounds of `n` concurrent runs a G2 level runs, one after another (`--min-runs`, default 50): a level of 10 runs
 * alone is under a second of a server's CPU, too short a measurement to repeat within a third from run to run.
 */
const roundsOf = (n: number) => Math.max(1, Math.ceil(params.minRuns / n))
const skip = new Set((option("skip") ?? "").split(",").filter((x) => x !== ""))
const only = option("only")
// (`--only antler,langgraph`: several servers)
const chosen = (id: string) => only === undefined || only.split(",").includes(id)
const STEPS_PER_RUN = params.toolSteps + 1
const STREAM_MODE: Array<"values" | "messages-tuple"> = ["values", "messages-tuple"]

const say = (text: string) => process.stderr.write(text)
const load = () => os.loadavg().map((x) => Math.round(x * 100) / 100)
const round = (x: number, digits = 2) => Math.round(x * 10 ** digits) / 10 ** digits
const quantile = (xs: ReadonlyArray<number>, q: number): number => {
  if (xs.length === 0) return NaN
  const s = Float64Array.from(xs).sort()
  return s[Math.min(s.length - 1, Math.floor(s.length * q))]!
}
/** The median and the 99th percentile of `xs`, rounded to `digits`. */
const p50p99 = (xs: ReadonlyArray<number>, digits: number) => ({
  p50: round(quantile(xs, 0.5), digits),
  p99: round(quantile(xs, 0.99), digits)
})

// ---------------------------------------------------------------------------------------------------------
// One streamed run

interface RunResult {
  readonly latencies: Array<number>
  readonly firstEventMs: number
  readonly tokens: number
  readonly events: number
}

/** An error with its causes (the SDK's "fetch failed" says why only in its cause). */
const describe = (error: unknown): string => {
  const parts: Array<string> = []
  for (let e: any = error, depth = 0; e !== undefined && e !== null && depth < 4; e = e.cause, depth++) {
    parts.push(e instanceof Error ? `${e.name}: ${e.message}${(e as any).code ? ` (${(e as any).code})` : ""}` : String(e))
  }
  return parts.join(" <- ").slice(0, 600)
}

/** Whether a fetch failed because its caller aborted it (a client dropping its stream on purpose). */
const aborted = (error: unknown) => error instanceof Error && error.name === "AbortError"

// the SDK reports a failed fetch without its cause: the first cause is kept here, for the report
const realFetch = globalThis.fetch
let fetchFailure: string | undefined
globalThis.fetch = (async (...args: Parameters<typeof fetch>) => {
  try {
    return await realFetch(...args)
  } catch (error) {
    if (!aborted(error)) fetchFailure ??= describe(error)
    throw error
  }
}) as typeof fetch

let runIds = 0
const nextRun = (prefix: string) => `${prefix}${(++runIds).toString(36)}`

/** Reads answer tokens off a stream part: each one's trip time, once per token. */
const tokenOf = (part: { event: string; data: unknown }): string | undefined => {
  if (!part.event.startsWith("messages")) return undefined
  const chunk = Array.isArray(part.data) ? part.data[0] : undefined
  const content = (chunk as { content?: unknown } | undefined)?.content
  return typeof content === "string" ? TOKEN.exec(content)?.[1] : undefined
}

const streamRun = async (model: ModelServer, server: Server, prefix: string): Promise<RunResult> => {
  const client = new Client({ apiUrl: server.url })
  const thread = await client.threads.create()
  const run = nextRun(prefix)
  const t0 = performance.now()
  let firstEventMs = NaN
  const latencies: Array<number> = []
  const seen = new Set<string>()
  let events = 0
  for await (
    const part of client.runs.stream(thread.thread_id, server.assistant, {
      input: { messages: [{ type: "human", content: `Please take notes (bench run ${run}).` }] },
      streamMode: STREAM_MODE
    })
  ) {
    const now = performance.now()
    events++
    if (Number.isNaN(firstEventMs)) firstEventMs = now - t0
    if (part.event === "error") throw new Error(`${server.id} run ${run}: ${JSON.stringify(part.data).slice(0, 300)}`)
    const token = tokenOf(part)
    if (token !== undefined && !seen.has(token)) {
      seen.add(token)
      const sent = model.sent.get(token)
      if (sent !== undefined) {
        latencies.push(now - sent)
        model.sent.delete(token)
      }
    }
  }
  if (seen.size !== params.answerTokens) {
    throw new Error(`${server.id} run ${run}: ${seen.size} of ${params.answerTokens} answer tokens streamed`)
  }
  return { latencies, firstEventMs, tokens: seen.size, events }
}

// ---------------------------------------------------------------------------------------------------------
// G1, G2, G3

/** How many of an answer's tokens G1 reports apart (`firstTokensOfAnswer`). */
const FIRST_TOKENS = 5

const g1 = async (model: ModelServer, servers: ReadonlyArray<Server>) => {
  const by: Record<string, Array<RunResult>> = {}
  // warm-up, as each G2 level's server is warmed: what users stream through is a server that has run before
  for (const s of servers) await alone(s, servers, async () => {
    for (let k = 0; k < params.warmRuns; k++) await streamRun(model, s, "w")
  })
  for (let i = 0; i < params.g1Runs; i++) {
    for (let k = 0; k < servers.length; k++) {
      const s = servers[(i + k) % servers.length]!
      ;(by[s.id] ??= []).push(await alone(s, servers, () => streamRun(model, s, "a")))
    }
  }
  return Object.fromEntries(Object.entries(by).map(([id, runs]) => {
    const latencies = runs.flatMap((r) => r.latencies)
    return [id, {
      runs: runs.length,
      tokens: latencies.length,
      addedMsPerToken: p50p99(latencies, 3),
      // where the slow tokens are: an answer's first tokens (its message set up, the step before it written) or
      // anywhere (collections, the client)
      firstTokensOfAnswer: p50p99(runs.flatMap((r) => r.latencies.slice(0, FIRST_TOKENS)), 3),
      laterTokens: p50p99(runs.flatMap((r) => r.latencies.slice(FIRST_TOKENS)), 3),
      firstEventMs: { p50: round(quantile(runs.map((r) => r.firstEventMs), 0.5)) },
      eventsPerRun: round(runs.reduce((a, r) => a + r.events, 0) / runs.length, 1)
    }]
  }))
}

/** CPU ms each server's process tree uses over the next `ms`. */
const cpuDuring = async (servers: ReadonlyArray<Server>, ms: number) => {
  const before = servers.map((s) => usageOf(s.pid).cpuMs)
  await sleep(ms)
  return servers.map((s, i) => usageOf(s.pid).cpuMs - before[i]!)
}

/** CPU ms each server uses in half a second while idle, over 2 s (LangGraph's dev server never idles at 0). */
const idleOf = async (servers: ReadonlyArray<Server>) => {
  const used = await cpuDuring(servers, 2000)
  return new Map(servers.map((s, i) => [s.id, used[i]! / 4]))
}

/**
 * Waits until every server is back to its idle use of the CPU (`idle`, plus 5 % of a core) over half a second, at
 * most a minute, so that a level does not share the 2 cores with what the level before left running on another
 * server (its queue, its GC); the seconds waited, and the servers still busy when the minute ran out.
 */
const quiet = async (servers: ReadonlyArray<Server>, idle: ReadonlyMap<string, number>) => {
  const t0 = performance.now()
  for (;;) {
    const used = await cpuDuring(servers, 500)
    const busy = servers.flatMap((s, i) => (used[i]! > (idle.get(s.id) ?? 0) + 25 ? [s.id] : []))
    const waitedS = round((performance.now() - t0) / 1000)
    if (busy.length === 0 || waitedS > 60) return { waitedS, stillBusy: busy }
  }
}

const level = async (
  model: ModelServer,
  server: Server,
  n: number,
  quietS: Awaited<ReturnType<typeof quiet>>
) => {
  const u0 = usageOf(server.pid)
  let peak = u0.rssBytes
  const sampler = setInterval(() => {
    peak = Math.max(peak, usageOf(server.pid).rssBytes)
  }, 100)
  // the bench's own process (the client and the model server): when it is at a whole core, the latencies
  // measured include its own lag, whatever the server does
  const loopDelay = monitorEventLoopDelay({ resolution: 10 })
  loopDelay.enable()
  const client0 = process.cpuUsage()
  const t0 = performance.now()
  const rounds = roundsOf(n)
  const settled: Array<PromiseSettledResult<RunResult>> = []
  try {
    for (let round = 0; round < rounds; round++) {
      settled.push(...await Promise.allSettled(Array.from({ length: n }, () => streamRun(model, server, "c"))))
      // memory per active run is the first round's: later rounds start on the garbage the first left
      if (round === 0) {
        clearInterval(sampler)
        peak = Math.max(peak, usageOf(server.pid).rssBytes)
      }
    }
  } finally {
    clearInterval(sampler)
    loopDelay.disable()
  }
  const client = process.cpuUsage(client0)
  const results = settled.flatMap((r) => (r.status === "fulfilled" ? [r.value] : []))
  const failures = settled.flatMap((r) => (r.status === "rejected" ? [describe(r.reason)] : []))
  const wallMs = performance.now() - t0
  const u1 = usageOf(server.pid)
  const steps = results.length * STEPS_PER_RUN
  const cpuS = (u1.cpuMs - u0.cpuMs) / 1000
  const latencies = results.flatMap((r) => r.latencies)
  return {
    runs: n,
    rounds,
    quietS,
    failedRuns: failures.length,
    ...(failures.length > 0
      ? { firstFailure: failures[0], fetchFailure, serverOutput: server.output().slice(-1500) }
      : {}),
    steps,
    wallS: round(wallMs / 1000),
    stepsPerS: round(steps / (wallMs / 1000), 1),
    cpuS: round(cpuS),
    cpuSPer1000Steps: round((cpuS * 1000) / steps),
    stepsPerCpuS: round(steps / cpuS, 1),
    addedMsPerToken: p50p99(latencies, 2),
    firstEventMs: { p50: round(quantile(results.map((r) => r.firstEventMs), 0.5)) },
    rssStartMB: round(u0.rssBytes / 2 ** 20, 1),
    rssPeakMB: round(peak / 2 ** 20, 1),
    rssMBPerActiveRun: round((peak - u0.rssBytes) / 2 ** 20 / n, 3),
    client: {
      cpuShareOfACore: round((client.user + client.system) / 1000 / wallMs),
      loopDelayMs: { p50: round(loopDelay.percentile(50) / 1e6, 1), p99: round(loopDelay.percentile(99) / 1e6, 1) }
    }
  }
}

/**
 * Stops `servers[at]` and starts it afresh in its place, then runs `params.warmRuns` runs on it one at a time (the
 * others stopped once for all of them) and measures its idle CPU again: each G2 level's memory per run is then
 * what that level adds to a warm server, not to one already grown by the levels before (a Node process keeps the
 * heap it grew).
 */
const restart = async (
  model: ModelServer,
  servers: Array<Server>,
  at: number,
  starts: ReadonlyMap<string, () => Promise<Server>>,
  idle: Map<string, number>
) => {
  const old = servers[at]!
  await old.stop()
  const s = servers[at] = await starts.get(old.id)!()
  await alone(s, servers, async () => {
    for (let k = 0; k < params.warmRuns; k++) await streamRun(model, s, "w")
  })
  idle.set(s.id, (await idleOf([s])).get(s.id)!)
  return s
}

/**
 * Each level on each server in turn, the first server rotating from one level to the next, each level on a fresh
 * server (`restart`; `env`, when given, is in the server's environment as it starts): what `measure` finds of
 * server `s` at `n` concurrent runs, by server id and level (a level it finds nothing of is left out).
 */
const eachLevel = async <A>(
  model: ModelServer,
  servers: Array<Server>,
  idle: Map<string, number>,
  starts: ReadonlyMap<string, () => Promise<Server>>,
  measure: (s: Server, n: number) => Promise<A | undefined>,
  env: Readonly<Record<string, string>> = {}
) => {
  const out: Record<string, Record<string, A>> = {}
  for (const [i, n] of params.levels.entries()) {
    for (let k = 0; k < servers.length; k++) {
      const saved = Object.keys(env).map((key) => [key, process.env[key]] as const)
      Object.assign(process.env, env)
      let s: Server
      try {
        s = await restart(model, servers, (i + k) % servers.length, starts, idle)
      } finally {
        for (const [key, value] of saved) {
          if (value === undefined) delete process.env[key]
          else process.env[key] = value
        }
      }
      const r = await measure(s, n)
      if (r !== undefined) (out[s.id] ??= {})[String(n)] = r
    }
  }
  return out
}

const g2 = (
  model: ModelServer,
  servers: Array<Server>,
  idle: Map<string, number>,
  starts: ReadonlyMap<string, () => Promise<Server>>
) =>
  eachLevel(model, servers, idle, starts, async (s, n) => {
    const quietS = await quiet(servers, idle)
    say(`  G2 ${n} concurrent runs on ${s.label} ... `)
    const r = await alone(s, servers, () => level(model, s, n, quietS))
    say(`${r.wallS} s, ${r.stepsPerCpuS} steps/CPU-s, p99 ${r.addedMsPerToken.p99} ms/token, ` +
      `${r.rssMBPerActiveRun} MB/run${r.failedRuns > 0 ? `, ${r.failedRuns} FAILED: ${r.firstFailure}` : ""}\n`)
    return r
  })

// ---------------------------------------------------------------------------------------------------------
// --kept: the heap a server keeps per active run

const KEPT_PROBE = path.join(root, "bench", "keptProbe.cjs")

/**
 * The heap (MB) the processes of `server`'s tree use after each collected its garbage in full (`keptProbe.cjs`,
 * loaded into each through NODE_OPTIONS, answers SIGUSR2); undefined when none of them has the probe.
 */
const keptHeapOf = async (server: Server, dir: string): Promise<number | undefined> => {
  const pids = tree(server.pid).filter((pid) => fs.existsSync(path.join(dir, `${pid}.ready`)))
  const before = new Map(pids.map((pid) => [pid, linesOf(dir, pid).length]))
  for (const pid of pids) {
    try {
      process.kill(pid, "SIGUSR2")
    } catch {
      // gone meanwhile
    }
  }
  let total: number | undefined
  for (const pid of pids) {
    const answered = () => {
      const lines = linesOf(dir, pid)
      return lines.length > before.get(pid)! ? lines.at(-1) : undefined
    }
    let heap = answered()
    for (let waited = 0; waited < 3000 && heap === undefined; waited += 20) {
      await sleep(20)
      heap = answered()
    }
    if (heap !== undefined) total = (total ?? 0) + Number(heap)
  }
  return total
}
const linesOf = (dir: string, pid: number): Array<string> => {
  try {
    return fs.readFileSync(path.join(dir, `${pid}.heap`), "utf8").trim().split("\n").filter((l) => l !== "")
  } catch {
    return []
  }
}

/**
 * `--kept`: each G2 level again on fresh servers whose processes collect their garbage in full every 200 ms while
 * the level runs (which costs them CPU: this pass measures memory only). The heap kept per active run = (the most kept during
 * the level - what the warm server kept before it) / concurrent runs: what the runs hold, without the garbage a
 * collector leaves until it needs the room (which RSS per active run includes).
 */
const kept = async (
  model: ModelServer,
  servers: Array<Server>,
  idle: Map<string, number>,
  starts: ReadonlyMap<string, () => Promise<Server>>
) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "bench-kept-"))
  const env = { NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ""} --require=${KEPT_PROBE}`.trim(), KEPT_PROBE_DIR: dir }
  try {
    return await eachLevel(model, servers, idle, starts, async (s, n) => {
      say(`  kept heap, ${n} concurrent runs on ${s.label} ... `)
      const r = await alone(s, servers, async () => {
        const start = await keptHeapOf(s, dir)
        if (start === undefined) return undefined
        let peak = start
        let sampling = true
        const sampler = (async () => {
          while (sampling) {
            await sleep(200)
            if (sampling) peak = Math.max(peak, (await keptHeapOf(s, dir)) ?? 0)
          }
        })()
        try {
          await Promise.allSettled(Array.from({ length: n }, () => streamRun(model, s, "k")))
        } finally {
          sampling = false
          await sampler
        }
        return { startMB: round(start, 1), peakMB: round(peak, 1), keptMBPerActiveRun: round((peak - start) / n, 3) }
      })
      say(r === undefined ? "no probe answered\n" : `${r.keptMBPerActiveRun} MB/run (${r.startMB} -> ${r.peakMB} MB)\n`)
      return r
    }, env)
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
}

/** One client of G3: starts a resumable run, drops it after some answer tokens, rejoins with Last-Event-ID. */
const reconnecting = async (server: Server) => {
  // the SDK retries a failed request (an error, or a 5xx status) after 1-2 s, then 2-4 s, then 4-8 s: each failed
  // attempt is counted, as its wait is part of the time to resume; and the rejoin's response headers are timed,
  // to tell a server slow to answer from a stream slow to deliver
  const failedAttempts: Array<string> = []
  let rejoinHeadersAt: number | undefined
  const client = new Client({
    apiUrl: server.url,
    callerOptions: {
      fetch: async (...args: Parameters<typeof fetch>) => {
        try {
          const response = await fetch(...args)
          if (response.status >= 500) failedAttempts.push(`HTTP ${response.status}`)
          else if ((args[1]?.method ?? "GET") === "GET" && String(args[0]).includes("/stream")) {
            rejoinHeadersAt ??= performance.now()
          }
          return response
        } catch (error) {
          if (!aborted(error)) failedAttempts.push(describe(error))
          throw error
        }
      }
    }
  })
  const thread = await client.threads.create()
  const run = nextRun("g")
  const counts = new Map<string, number>()
  const ids = new Map<string, number>()
  let runId: string | undefined
  let lastEventId: string | undefined
  let gaps = 0
  const note = (part: { event: string; data: unknown; id?: string | undefined }) => {
    if (part.event === "error") throw new Error(`${server.id} run ${run}: ${JSON.stringify(part.data).slice(0, 300)}`)
    if (part.event === "gap") gaps++
    if (part.id !== undefined && part.event !== "gap") {
      ids.set(part.id, (ids.get(part.id) ?? 0) + 1)
      lastEventId = part.id
    }
    const token = tokenOf(part)
    if (token !== undefined) counts.set(token, (counts.get(token) ?? 0) + 1)
  }
  const abort = new AbortController()
  try {
    for await (
      const part of client.runs.stream(thread.thread_id, server.assistant, {
        input: { messages: [{ type: "human", content: `Please take notes (bench run ${run}).` }] },
        streamMode: STREAM_MODE,
        streamResumable: true,
        onDisconnect: "continue",
        signal: abort.signal,
        onRunCreated: (meta) => {
          runId = meta.run_id
        }
      })
    ) {
      note(part)
      if (counts.size >= params.dropAfterTokens) {
        abort.abort()
        break
      }
    }
  } catch (error) {
    if (!abort.signal.aborted) throw error
  }
  if (runId === undefined) throw new Error(`${server.id} run ${run}: no run id (Content-Location)`)
  if (lastEventId === undefined) throw new Error(`${server.id} run ${run}: no event ids`)
  const t0 = performance.now()
  let resumeMs = NaN
  for await (
    const part of client.runs.joinStream(thread.thread_id, runId, { lastEventId, streamMode: STREAM_MODE })
  ) {
    if (Number.isNaN(resumeMs)) resumeMs = performance.now() - t0
    note(part)
  }
  let lost = 0
  let repeated = 0
  for (let i = 0; i < params.answerTokens; i++) {
    const c = counts.get(`r${run}t${i}`) ?? 0
    if (c === 0) lost++
    else repeated += c - 1
  }
  let repeatedIds = 0
  for (const c of ids.values()) repeatedIds += c - 1
  const headersMs = (rejoinHeadersAt ?? NaN) - t0
  return { lost, repeated, repeatedIds, gaps, resumeMs, headersMs, rejoinedAt: t0, failedAttempts }
}

const g3 = async (servers: ReadonlyArray<Server>, idle: ReadonlyMap<string, number>) => {
  const out: Record<string, object> = {}
  for (const s of servers) {
    await quiet(servers, idle)
    say(`  G3 ${params.g3Clients} reconnecting clients on ${s.label} ... `)
    const t0 = performance.now()
    const settled = await alone(s, servers, () =>
      Promise.allSettled(Array.from({ length: params.g3Clients }, () => reconnecting(s)))
    )
    const results = settled.flatMap((r) => (r.status === "fulfilled" ? [r.value] : []))
    const failures = settled.flatMap((r) => (r.status === "rejected" ? [describe(r.reason)] : []))
    const resume = results.map((r) => r.resumeMs)
    const headers = results.map((r) => r.headersMs)
    const r = {
      clients: params.g3Clients,
      failedClients: failures.length,
      ...(failures.length > 0 ? { firstFailure: failures[0], fetchFailure } : {}),
      wallS: round((performance.now() - t0) / 1000),
      tokensLost: results.reduce((a, r) => a + r.lost, 0),
      tokensRepeated: results.reduce((a, r) => a + r.repeated, 0),
      eventIdsRepeated: results.reduce((a, r) => a + r.repeatedIds, 0),
      gapEvents: results.reduce((a, r) => a + r.gaps, 0),
      failedAttempts: results.reduce((a, r) => a + r.failedAttempts.length, 0),
      firstFailedAttempt: results.flatMap((r) => r.failedAttempts)[0],
      resumeMs: p50p99(resume, 1),
      headersMs: p50p99(headers, 1),
      // the ten slowest rejoins: when each began (ms after the round began), the wait for the response's headers
      // and for its first event
      slowestResumes: results.slice().sort((a, b) => b.resumeMs - a.resumeMs).slice(0, 10).map((r) => ({
        atMs: round(r.rejoinedAt - t0, 0),
        headersMs: round(r.headersMs, 0),
        resumeMs: round(r.resumeMs, 0)
      }))
    }
    say(`${r.wallS} s, ${r.tokensLost} lost, ${r.tokensRepeated} repeated, resume p50 ${r.resumeMs.p50} ms` +
      `${failures.length > 0 ? `, ${failures.length} FAILED: ${failures[0]}` : ""}\n`)
    out[s.id] = r
  }
  return out
}

// ---------------------------------------------------------------------------------------------------------
// The table

const pad = (s: string, n: number) => s.padEnd(n)
const lpad = (s: string, n: number) => s.padStart(n)
const fmt = (x: number | undefined) =>
  x === undefined || Number.isNaN(x) ? "-" : Math.abs(x) >= 100 ? x.toFixed(0) : Math.abs(x) >= 10 ? x.toFixed(1) :
  x.toFixed(Math.abs(x) >= 1 ? 2 : 3)

interface Row {
  readonly figure: string
  readonly antler: number | undefined
  readonly memory: number | undefined
  readonly peer: number | undefined
  /** the bare relay's figure, where it has one (G1, G2) */
  readonly floor?: number | undefined
  readonly higherIsBetter: boolean
}

const ratioOf = (a: number | undefined, b: number | undefined) =>
  a !== undefined && b !== undefined && b !== 0 ? a / b : undefined
const verdict = (ratio: number | undefined, higherIsBetter: boolean) =>
  ratio === undefined || ratio === 1
    ? ""
    : higherIsBetter === ratio > 1
    ? `${fmt(higherIsBetter ? ratio : 1 / ratio)}× better`
    : `${fmt(higherIsBetter ? 1 / ratio : ratio)}× worse`

/** Antler over SQLite and over memory, LangGraph, the ratios Antler ÷ LangGraph (SQLite, memory), the floor. */
const table = (rows: ReadonlyArray<Row>): string => {
  const lines = [
    `  ${pad("figure", 42)}${lpad("SQLite", 9)}${lpad("memory", 9)}${lpad("LangGraph", 11)}` +
    `${lpad("SQLite÷LG", 11)}${lpad("memory÷LG", 11)}${lpad("floor", 9)}  Antler (SQLite) is`
  ]
  for (const r of rows) {
    const ratio = ratioOf(r.antler, r.peer)
    lines.push(
      `  ${pad(r.figure, 42)}${lpad(fmt(r.antler), 9)}${lpad(fmt(r.memory), 9)}${lpad(fmt(r.peer), 11)}` +
        `${lpad(fmt(ratio), 11)}${lpad(fmt(ratioOf(r.memory, r.peer)), 11)}${lpad(fmt(r.floor), 9)}  ` +
        verdict(ratio, r.higherIsBetter)
    )
  }
  return lines.join("\n") + "\n"
}

// ---------------------------------------------------------------------------------------------------------

const peerFolder = path.join(root, "bench", PEER_DIR)
const work = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "antler-gateway-bench-")))
const servers: Array<Server> = []
let model: ModelServer | undefined
try {
  const t0 = Date.now()
  const loadStart = load()
  say(`bench:gateway (${profile}): ${os.cpus().length} cores, load average ${loadStart.join(" ")} at start\n`)
  const started = await startModel(params)
  model = started
  const cpuProf = option("cpu-prof")
  const nodeArgs = [
    ...(cpuProf === undefined ? [] : ["--cpu-prof", "--cpu-prof-dir", path.resolve(cpuProf)]),
    // (flags for the servers' node, for experiments: `--node-arg --heap-growing-percent=20`, repeatable)
    ...process.argv.flatMap((arg, i) => arg === "--node-arg" && process.argv[i + 1] !== undefined ? [process.argv[i + 1]!] : [])
  ]
  // how to start each server (again: G2 measures each level on a fresh process)
  const starts = new Map<string, () => Promise<Server>>()
  // (`--max-active-runs N`: Antler's `gateway.max_active_runs`, for an experiment; the peer keeps its job count)
  const gatewayConfig = option("max-active-runs") === undefined
    ? {}
    : { max_active_runs: numbers(option("max-active-runs"), [])[0] }
  if (chosen("antler")) {
    const cli = antlerCli(root, option("cli"))
    const home = path.join(work, "antler")
    starts.set("antler", () => startAntler(cli, home, started.url, nodeArgs, gatewayConfig))
  }
  if (chosen("antler-memory")) {
    const entry = path.join(here, "gatewayMemoryServer.js")
    const home = path.join(work, "antler-memory")
    starts.set("antler-memory", () => startAntlerMemory(entry, home, started.url, nodeArgs, gatewayConfig))
  }
  if (chosen("langgraph")) {
    ensurePeer(peerFolder, say)
    const jobs = Math.max(...params.levels, params.g3Clients)
    starts.set("langgraph", () => startPeer(peerFolder, path.join(work, "peer"), started.url, jobs))
  }
  // the floor, in G1's rounds and G2's levels: what a bare relay adds per token (the client, the loopback, the
  // model's stream) and costs, alone on the machine as each server is; it has no resumable runs, so no G3
  starts.set("floor", () => startFloor(path.join(here, "gatewayFloor.js"), started.url))
  for (const start of starts.values()) servers.push(await start())
  say(`  servers: ${servers.map((s) => `${s.label} at ${s.url}`).join("; ")}\n`)
  say(`  a run: ${params.toolSteps} tool steps, then ${params.answerTokens} tokens ${params.tokenIntervalMs} ms apart\n`)
  if (profile === "quick") say("  quick: a smoke test (few runs, small levels): quote the default profile's figures\n")
  const idle = await idleOf(servers)
  say(`  idle CPU ms per half second: ${servers.map((s) => `${s.id} ${round(idle.get(s.id)!)}`).join(", ")}\n`)
  const G1 = skip.has("g1") ? {} : await g1(started, servers)
  if (!skip.has("g1")) {
    const f = (G1 as Record<string, any>)["floor"]
    say(`  G1 done (${params.g1Runs} runs each); the floor (a bare relay): added ms per token p50 ` +
      `${f?.addedMsPerToken.p50}, p99 ${f?.addedMsPerToken.p99}; first event ${f?.firstEventMs.p50} ms\n`)
  }
  const G2 = skip.has("g2") ? {} : await g2(started, servers, idle, starts)
  await servers.splice(servers.findIndex((s) => s.id === "floor"), 1)[0]!.stop()
  const G3 = skip.has("g3") ? {} : await g3(servers, idle)
  const KEPT = process.argv.includes("--kept") ? await kept(started, servers, idle, starts) : undefined
  const loadEnd = load()
  const result = {
    harness: "antler-vs-langgraph-api",
    job: "gateway-load",
    profile,
    meta: {
      date: new Date(t0).toISOString(),
      node: process.version,
      cpus: os.cpus().length,
      cpuModel: os.cpus()[0]?.model,
      loadavgStart: loadStart,
      loadavgEnd: loadEnd,
      totalSeconds: round((Date.now() - t0) / 1000, 1),
      params,
      servers: servers.map((s) => ({ id: s.id, label: s.label })),
      peerVersions: chosen("langgraph") ? peerVersions(peerFolder) : undefined,
      notes: [
        "added latency per token: from the model server writing the token's chunk to the SDK client yielding it",
        "CPU and RSS: the server's whole process tree (LangGraph: the CLI and its server child) from /proc",
        "RSS per active run: (peak RSS during the level's first round - RSS at its start) / concurrent runs, each level on a fresh server process warmed by params.warmRuns runs",
        "a level runs rounds of its concurrent runs, one after another, until it has run params.minRuns: steps, CPU and latencies are all rounds'",
        "client: the bench's own process (SDK clients and the model server) during the level: CPU share of a core, event-loop delay",
        "kept heap per active run (--kept): (the most heap kept after a full GC during the level - what the warm server kept before it) / concurrent runs, summed over the server's node processes, each level again on fresh servers"
      ]
    },
    g1: G1,
    g2: G2,
    g3: G3,
    ...(KEPT !== undefined ? { kept: KEPT } : {})
  }
  const text = JSON.stringify(result, null, 2) + "\n"
  process.stdout.write(text)
  const suffix = only !== undefined ? `-${only}` : ""
  const file = option("out") ?? path.join(root, "bench", "results", `gateway-${profile}${suffix}.json`)
  fs.mkdirSync(path.dirname(file), { recursive: true })
  fs.writeFileSync(file, text)

  /** A row of the table: `pick` reads the figure off one server's result in `g` (G1's, a G2 level's, G3's). */
  const row = (g: Record<string, any>, figure: string, pick: (r: any) => number | undefined, higherIsBetter = false) => {
    const of = (id: string) => (g[id] === undefined ? undefined : pick(g[id]))
    return { figure, antler: of("antler"), memory: of("antler-memory"), peer: of("langgraph"), floor: of("floor"), higherIsBetter }
  }
  const rows: Array<Row> = []
  if (!skip.has("g1")) {
    rows.push(
      row(G1, "G1 added ms per token, p50", (r) => r.addedMsPerToken.p50),
      row(G1, "G1 added ms per token, p99", (r) => r.addedMsPerToken.p99),
      row(G1, "G1 time to first event, ms (p50)", (r) => r.firstEventMs.p50)
    )
  }
  for (const n of skip.has("g2") ? [] : params.levels) {
    const atLevel = Object.fromEntries(Object.entries(G2).map(([id, levels]) => [id, levels[String(n)]]))
    rows.push(
      row(atLevel, `G2 ${n} runs: steps/s`, (r) => r.stepsPerS, true),
      row(atLevel, `G2 ${n} runs: steps per CPU-second`, (r) => r.stepsPerCpuS, true),
      row(atLevel, `G2 ${n} runs: CPU-s per 1,000 steps`, (r) => r.cpuSPer1000Steps),
      row(atLevel, `G2 ${n} runs: added ms per token, p50`, (r) => r.addedMsPerToken.p50),
      row(atLevel, `G2 ${n} runs: added ms per token, p99`, (r) => r.addedMsPerToken.p99),
      row(atLevel, `G2 ${n} runs: runs failed`, (r) => r.failedRuns),
      row(atLevel, `G2 ${n} runs: RSS MB per active run`, (r) => r.rssMBPerActiveRun),
      row(atLevel, `G2 ${n} runs: bench client, share of a core`, (r) => r.client.cpuShareOfACore),
      row(atLevel, `G2 ${n} runs: bench client loop delay p99 ms`, (r) => r.client.loopDelayMs.p99)
    )
  }
  if (!skip.has("g3")) {
    const rejoins = `G3 ${params.g3Clients} rejoins:`
    rows.push(
      row(G3, `${rejoins} clients failed`, (r) => r.failedClients),
      row(G3, `${rejoins} tokens lost`, (r) => r.tokensLost),
      row(G3, `${rejoins} tokens repeated`, (r) => r.tokensRepeated),
      row(G3, `${rejoins} event ids repeated`, (r) => r.eventIdsRepeated),
      row(G3, `${rejoins} gap events`, (r) => r.gapEvents),
      row(G3, `${rejoins} ms to resume, p50`, (r) => r.resumeMs.p50),
      row(G3, `${rejoins} ms to resume, p99`, (r) => r.resumeMs.p99),
      row(G3, `${rejoins} ms to its headers, p99`, (r) => r.headersMs.p99),
      row(G3, `${rejoins} requests failed, retried`, (r) => r.failedAttempts)
    )
  }
  for (const n of KEPT === undefined ? [] : params.levels) {
    const atLevel = Object.fromEntries(Object.entries(KEPT!).map(([id, levels]) => [id, levels[String(n)]]))
    rows.push(row(atLevel, `${n} runs: heap MB kept per active run`, (r) => r.keptMBPerActiveRun))
  }
  say(`\nbench:gateway (${profile}) — ${result.meta.date} — node ${process.version}, ${os.cpus().length} cores, ` +
    `${result.meta.totalSeconds} s\n`)
  say(`load average (1, 5, 15 min): ${loadStart.join(" ")} at start, ${loadEnd.join(" ")} at end\n`)
  say(`Antler: antler serve, full lead chain, SQLite (and memory: bench/gatewayMemoryServer.ts); LangGraph: langgraphjs dev ` +
    `(${Object.entries(result.meta.peerVersions ?? {}).map(([k, v]) => `${k} ${v}`).join(", ")}), createAgent, in memory\n`)
  say(table(rows))
  say(`  JSON: ${path.relative(process.cwd(), file)}\n`)
} finally {
  for (const s of servers) await s.stop()
  await model?.close()
  fs.rmSync(work, { recursive: true, force: true })
}
