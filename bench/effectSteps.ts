/**
 * Effect steps (ops of Effect's run loop) per step and per run, counted, not timed: the same on a quiet machine
 * and on a loaded one, so a change to the chain's shape can be judged when timings cannot.
 *   npm run bench:effect-steps              # full and bare, in memory and over SQLite
 *   npm run bench:effect-steps -- --each    # also the full chain (in memory) with each middleware left out
 *
 * Counted by wrapping each fiber's scheduler: Effect's run loop asks `shouldYield` once per op. A run of 1 step
 * and a run of 21 steps (after 5 warm runs of each) give per step = (c21 - c1) / 20 and per run = c1 - per step
 * (a run's set-up, its last model call, which calls no tool, and its end). Prints a table on stderr and the JSON
 * on stdout (also written to bench/results/effect-steps.json).
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import type { Chain, Store } from "./common.js"
import { makeHarness } from "./common.js"
import { leadOrder } from "../src/programs/Chains.js"
import * as M from "../src/state/Message.js"

const here = path.dirname(fileURLToPath(import.meta.url))
const root = path.resolve(here, "..", fs.existsSync(path.join(here, "..", "package.json")) ? "" : "..")

interface Scheduler {
  readonly shouldYield: (fiber: unknown) => number | false
  readonly scheduleTask: (task: () => void, priority: number, fiber: unknown) => void
}
interface FiberProto {
  currentScheduler: Scheduler
  runLoop: (effect: unknown) => unknown
  refreshRefCache: () => void
}

let counted = 0
// The run loop's class is internal to Effect: reached by its file, beside the package's entry.
const runtimeModule = new URL("./internal/fiberRuntime.js", import.meta.resolve("effect"))
const { FiberRuntime } = (await import(runtimeModule.href)) as { FiberRuntime: { prototype: FiberProto } }
const wrapped = new WeakMap<Scheduler, Scheduler>()
const counting = (scheduler: Scheduler): Scheduler => {
  if ((scheduler as { readonly counting?: true }).counting === true) return scheduler
  const existing = wrapped.get(scheduler)
  if (existing !== undefined) return existing
  const wrapper = {
    counting: true as const,
    shouldYield: (fiber: unknown) => {
      counted++
      return scheduler.shouldYield(fiber)
    },
    scheduleTask: (task: () => void, priority: number, fiber: unknown) => scheduler.scheduleTask(task, priority, fiber)
  }
  wrapped.set(scheduler, wrapper)
  return wrapper
}
const proto = FiberRuntime.prototype
const runLoop = proto.runLoop
const refresh = proto.refreshRefCache
proto.refreshRefCache = function(this: FiberProto) {
  refresh.call(this)
  this.currentScheduler = counting(this.currentScheduler)
}
proto.runLoop = function(this: FiberProto, effect: unknown) {
  this.currentScheduler = counting(this.currentScheduler)
  return runLoop.call(this, effect)
}

interface Count {
  readonly perStep: number
  readonly perRun: number
}

const measure = async (chain: Chain, store: Store, drop?: string): Promise<Count | { error: string }> => {
  const before = process.env.BENCH_DROP
  if (drop !== undefined) process.env.BENCH_DROP = drop
  else delete process.env.BENCH_DROP
  const h = makeHarness(chain, store)
  let n = 0
  const count = async (steps: number) => {
    for (let i = 0; i < 5; i++) await h.run(`warm-${n++}`, steps, [M.human("Refactor the workspace.")])
    counted = 0
    const end = await h.run(`counted-${n++}`, steps, [M.human("Refactor the workspace.")])
    if (end.status !== "success") throw new Error(`run ended ${end.status}: ${JSON.stringify(end)}`)
    return counted
  }
  try {
    const one = await count(1)
    const many = await count(21)
    const perStep = (many - one) / 20
    return { perStep, perRun: one - perStep }
  } catch (error) {
    return { error: String(error).slice(0, 300) }
  } finally {
    await h.close()
    if (before === undefined) delete process.env.BENCH_DROP
    else process.env.BENCH_DROP = before
  }
}

const results: Record<string, Count | { error: string }> = {}
for (const [chain, store] of [["full", "memory"], ["full", "sqlite"], ["bare", "memory"], ["bare", "sqlite"]] as const) {
  results[`${chain}+${store}`] = await measure(chain, store)
}
const each: Record<string, Count | { error: string }> = {}
if (process.argv.includes("--each")) {
  for (const item of leadOrder) {
    const r = await measure("full", "memory", item.name)
    // (an entry this configuration leaves out of the chain cannot be dropped: skipped)
    if (!("error" in r)) each[item.name] = r
  }
}

const out = { harness: "antler-effect-steps", date: new Date().toISOString(), node: process.version, results, without: each }
process.stdout.write(JSON.stringify(out, null, 2) + "\n")
const resultsDir = path.join(root, "bench", "results")
fs.mkdirSync(resultsDir, { recursive: true })
fs.writeFileSync(path.join(resultsDir, "effect-steps.json"), JSON.stringify(out, null, 2) + "\n")

const say = (text: string) => process.stderr.write(text + "\n")
say("effect steps        per step   per run")
for (const [name, r] of Object.entries(results)) {
  say("error" in r ? `${name.padEnd(18)}  ${r.error}` : `${name.padEnd(18)}  ${String(r.perStep).padStart(8)}  ${String(r.perRun).padStart(8)}`)
}
const full = results["full+memory"]
if (Object.keys(each).length > 0 && full !== undefined && !("error" in full)) {
  say("\nfull+memory without   saves per step   saves per run")
  for (const [name, r] of Object.entries(each)) {
    if ("error" in r) continue
    say(`${name.padEnd(24)}  ${String(full.perStep - r.perStep).padStart(14)}  ${String(full.perRun - r.perRun).padStart(14)}`)
  }
}
