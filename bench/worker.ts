/**
 * One benchmark job per process (a clean heap and RSS per job). Prints one JSON object on stdout.
 *   node --expose-gc --import tsx bench/worker.ts '<job JSON>'
 */
import { execFileSync } from "node:child_process"
import type { Chain, Store } from "./common.js"
import { cpuUs, gc, intervalsUs, makeHarness, median, mib, probe, round, seedThread } from "./common.js"
import * as M from "../src/state/Message.js"

type Cfg = { chain: Chain; store: Store }
type Job =
  | (Cfg & { kind: "w1"; steps: number; repeats: number; warmupRuns: number; gcBeforeRun?: boolean })
  | (Cfg & { kind: "w2len"; lengths: Array<number>; steps: number; repeats: number })
  | (Cfg & { kind: "w2grow"; messages: number })
  | (Cfg & { kind: "w4"; threads: number; steps: number; repeats: number; gcBetweenRounds?: boolean })

const job = JSON.parse(process.argv[2] ?? "{}") as Job
const h = makeHarness(job.chain, job.store)

const check = async (threadId: string, steps: number, startLength: number) => {
  const { count, text } = await h.messageCount(threadId)
  const want = startLength + 2 * steps + 1
  if (count !== want || !text.startsWith(`done after ${steps}`)) {
    throw new Error(`unexpected run on ${threadId}: ${count} messages (want ${want}), last=${text.slice(0, 60)}`)
  }
}

const go = (threadId: string, steps: number) =>
  h.run(threadId, steps, [M.human("Refactor the workspace.")]).then((end) => {
    if (end.status !== "success") throw new Error(`run ${threadId} ended ${end.status}: ${JSON.stringify(end)}`)
  })

let stepsRun = 0

/**
 * Under `valgrind --tool=callgrind` (bench/ab.ts --callgrind sets BENCH_CALLGRIND): the instruction counters are
 * zeroed before each measured run or round and dumped after it (`callgrind_control`), so the dumps count the
 * measured work alone, not the start-up, the warm-up, the checks or the forced GC between runs.
 */
const callgrind = process.env.BENCH_CALLGRIND === "1"
const counters = (command: "-z" | "-d", label?: string) => {
  if (!callgrind) return
  const args = label === undefined ? [command, String(process.pid)] : [command, label, String(process.pid)]
  execFileSync("callgrind_control", args, { stdio: "ignore" })
}

async function w1(j: Extract<Job, { kind: "w1" }>) {
  const runs: Array<{ wallUsPerStep: number; cpuUsPerStep: number; checkpointUsPerStep: number; serializedBytesPerStep: number }> = []
  const warmup: Array<number> = []
  for (let r = 0; r < j.warmupRuns + j.repeats; r++) {
    // (the contract's full GC before each run; `gcBeforeRun: false` runs them back to back, as an app or a busy
    // server does: no full collection between two runs unless V8 decides on one)
    if (j.gcBeforeRun !== false) gc()
    probe.reset()
    if (r >= j.warmupRuns) counters("-z")
    const c0 = process.cpuUsage()
    const t0 = performance.now()
    await go(`w1-${r}`, j.steps)
    stepsRun += j.steps
    const wall = performance.now() - t0
    if (r >= j.warmupRuns) counters("-d", `measured-w1-${r}`)
    const cpu = cpuUs(process.cpuUsage(c0))
    await check(`w1-${r}`, j.steps, 1)
    if (r < j.warmupRuns) {
      warmup.push(round((wall * 1000) / j.steps))
      continue
    }
    runs.push({
      wallUsPerStep: round((wall * 1000) / j.steps),
      cpuUsPerStep: round(cpu / j.steps),
      checkpointUsPerStep: round((probe.appendMs * 1000) / j.steps),
      serializedBytesPerStep: round(probe.appendBytes / j.steps)
    })
  }
  return {
    steps: j.steps,
    repeats: j.repeats,
    gcBeforeRun: j.gcBeforeRun !== false,
    wallUsPerStepMedian: median(runs.map((r) => r.wallUsPerStep)),
    wallUsPerStepMin: Math.min(...runs.map((r) => r.wallUsPerStep)),
    cpuUsPerStepMedian: median(runs.map((r) => r.cpuUsPerStep)),
    checkpointUsPerStepMedian: median(runs.map((r) => r.checkpointUsPerStep)),
    serializedBytesPerStep: median(runs.map((r) => r.serializedBytesPerStep)),
    runs,
    warmupWallUsPerStep: warmup
  }
}

async function w2len(j: Extract<Job, { kind: "w2len" }>) {
  // one unmeasured run at every length first, so the per-message loops are optimised
  for (const L of j.lengths) {
    await h.seed(`warm-${L}`, seedThread(L, `warm${L}`))
    await h.run(`warm-${L}`, j.steps, [])
    await check(`warm-${L}`, j.steps, L)
  }
  const points = []
  for (const L of j.lengths) {
    const iv: Array<number> = []
    let serialized = 0
    let appendMs = 0
    let steps = 0
    for (let r = 0; r < j.repeats; r++) {
      const id = `len-${L}-${r}`
      await h.seed(id, seedThread(L, `s${L}r${r}`))
      gc()
      probe.reset()
      const end = await h.run(id, j.steps, [])
      if (end.status !== "success") throw new Error(JSON.stringify(end))
      await check(id, j.steps, L)
      iv.push(...intervalsUs(probe.stamps))
      steps += probe.stamps.length
      serialized += probe.appendBytes
      appendMs += probe.appendMs
    }
    points.push({
      threadLength: L,
      runs: j.repeats,
      stepsMeasured: iv.length,
      wallUsPerStepMedian: round(median(iv)),
      wallUsPerStepMean: round(iv.reduce((a, b) => a + b, 0) / iv.length),
      checkpointUsPerStep: round((appendMs * 1000) / steps),
      serializedBytesPerStep: round(serialized / steps)
    })
  }
  const first = points[0]!.wallUsPerStepMedian
  return {
    stepsPerPoint: j.steps,
    points,
    growthLastOverFirst: round(points[points.length - 1]!.wallUsPerStepMedian / first, 2)
  }
}

async function w2grow(j: Extract<Job, { kind: "w2grow" }>) {
  const steps = (j.messages - 2) / 2
  for (let r = 0; r < 2; r++) await go(`warm-${r}`, Math.min(steps, 200))
  gc()
  const heapBefore = process.memoryUsage().heapUsed
  probe.reset()
  const c0 = process.cpuUsage()
  const t0 = performance.now()
  await go("grow", steps)
  const wall = performance.now() - t0
  const cpu = cpuUs(process.cpuUsage(c0))
  await check("grow", steps, 1)
  // counted now, and let go of, so the heap kept below is the harness's alone
  const serializedMiB = mib(probe.appendBytes)
  probe.appended = []
  const mem = process.memoryUsage()
  const win = (L: number) => {
    const end = Math.min(Math.max(Math.floor((L - 3) / 2), 21), probe.stamps.length - 1)
    const iv = intervalsUs(probe.stamps.slice(end - 20, end + 1))
    return { threadLength: 2 * end + 3, wallUsPerStepMedian: round(median(iv)) }
  }
  const windows = [win(0)]
  for (const L of [500, 1000, 1500, 2000]) if (L <= j.messages) windows.push(win(L))
  gc()
  const kept = process.memoryUsage()
  return {
    messages: j.messages,
    steps,
    totalWallMs: round(wall),
    totalCpuMs: round(cpu / 1000),
    meanWallUsPerStep: round((wall * 1000) / steps),
    windows,
    growthEndOverStart: round(windows[windows.length - 1]!.wallUsPerStepMedian / windows[0]!.wallUsPerStepMedian, 2),
    checkpoint: { totalMs: round(probe.appendMs), appends: probe.appends, serializedMiB },
    memory: {
      peakRssMiB: mib(process.resourceUsage().maxRSS * 1024),
      rssAfterMiB: mib(mem.rss),
      heapUsedAfterMiB: mib(mem.heapUsed),
      heapRetainedAfterGcMiB: mib(kept.heapUsed),
      heapBeforeMiB: mib(heapBefore),
      heapPlusExternalRetainedMiB: mib(kept.heapUsed + kept.external)
    }
  }
}

async function w4(j: Extract<Job, { kind: "w4" }>) {
  const round_ = async (tag: string) => {
    const t0 = performance.now()
    const c0 = process.cpuUsage()
    const done: Array<number> = new Array(j.threads)
    await Promise.all(
      Array.from({ length: j.threads }, (_, i) => go(`${tag}-${i}`, j.steps).then(() => (done[i] = performance.now() - t0)))
    )
    const wall = performance.now() - t0
    const cpu = cpuUs(process.cpuUsage(c0))
    for (let i = 0; i < j.threads; i++) await check(`${tag}-${i}`, j.steps, 1)
    const sorted = [...done].sort((a, b) => a - b)
    return {
      wallMs: round(wall),
      cpuMs: round(cpu / 1000),
      stepsPerSec: round((j.threads * j.steps) / (wall / 1000)),
      threadLatencyMs: {
        p50: round(sorted[Math.floor(j.threads * 0.5)]!),
        p99: round(sorted[Math.min(j.threads - 1, Math.floor(j.threads * 0.99))]!),
        max: round(sorted[j.threads - 1]!)
      }
    }
  }
  await round_("warmup")
  const runs = []
  for (let r = 0; r < j.repeats; r++) {
    // (the contract's full GC before each round; `gcBetweenRounds: false` measures rounds back to back, as a busy
    // server runs them: V8 re-optimises about a hundred functions after a forced full GC)
    if (j.gcBetweenRounds !== false) gc()
    counters("-z")
    const measured = await round_(`r${r}`)
    counters("-d", `measured-w4-${r}`)
    runs.push(measured)
  }
  return {
    threads: j.threads,
    gcBetweenRounds: j.gcBetweenRounds !== false,
    stepsPerThread: j.steps,
    repeats: j.repeats,
    wallMsMedian: median(runs.map((r) => r.wallMs)),
    stepsPerSecMedian: median(runs.map((r) => r.stepsPerSec)),
    cpuMsMedian: median(runs.map((r) => r.cpuMs)),
    runs,
    peakRssMiB: mib(process.resourceUsage().maxRSS * 1024)
  }
}

const t0 = performance.now()
let result: Record<string, unknown> = {}
try {
  switch (job.kind) {
    case "w1":
      result = await w1(job)
      break
    case "w2len":
      result = await w2len(job)
      break
    case "w2grow":
      result = await w2grow(job)
      break
    case "w4":
      result = await w4(job)
      break
    default:
      throw new Error(`unknown job ${JSON.stringify(job)}`)
  }
} finally {
  const sizes = await h.close()
  // on disk after closing (the write-ahead log folded in), per step written in this job: the checkpoint pages,
  // and the whole file (which also holds the snapshots that loading a long thread caches)
  if (job.store === "sqlite" && stepsRun > 0) {
    result.checkpointBytesPerStep = round(sizes.checkpoints / stepsRun)
    result.fileBytesPerStep = round(sizes.file / stepsRun)
  }
}
result.jobWallS = round((performance.now() - t0) / 1000, 2)
process.stdout.write(JSON.stringify(result) + "\n")
