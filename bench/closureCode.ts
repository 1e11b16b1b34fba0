/**
 * What a full GC does to continuations, Effect's style of code, in plain JavaScript (no Antler, no Effect):
 *   npm run bench:closure-code
 *
 * A continuation is a closure stored on an op object and called later by a run loop that sees many call sites
 * (so the JIT cannot inline it and compiles it on its own). Two ways to write one:
 * - `perCall`: the closure is made each time the op is made (`Effect.flatMap(x, (a) => ...)` in a function);
 * - `module`: the op points at a function made once (a module function).
 * Both run warm, then `gc()` forces a full collection and the same batches run again. V8 keeps a function's
 * optimised code on the feedback vector its closures share, and holds it there weakly: when no closure of that
 * site is alive at a full GC, the code is dropped and the next closures start again in the interpreter.
 * Prints one JSON object (medians over rounds, µs per call) and writes it to bench/results/closure-code.json.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"

// (its own helpers: importing the harness would load Antler and Effect into the heap the GC walks)
const gc = (globalThis as { gc?: () => void }).gc
if (gc === undefined) throw new Error("run with node --expose-gc")
const round = (x: number, digits: number): number => Math.round(x * 10 ** digits) / 10 ** digits
const median = (xs: ReadonlyArray<number>): number => [...xs].sort((a, b) => a - b)[xs.length >> 1]!

const SITES = 8
const CALLS = 4000
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 7)
const BATCHES_AFTER = 3

type Op = { readonly k: (y: number) => number; readonly x: number }
type Maker = (x: number) => Op

// Eight distinct sites of each kind, with the same work in their bodies (the run loop below sees eight targets).
const body = (k: number) => `let s = ${k}; for (let i = 0; i < 20; i++) s += (y * i) ^ (s >>> 1); return s`
const perCall: ReadonlyArray<Maker> = Array.from(
  { length: SITES },
  (_, k) => new Function("x", `return { k: (y) => { ${body(k)} }, x }`) as Maker
)
const moduleFunctions = Array.from({ length: SITES }, (_, k) => new Function("y", body(k)) as (y: number) => number)
const module_: ReadonlyArray<Maker> = moduleFunctions.map((k) => (x: number) => ({ k, x }))

const runLoop = (ops: ReadonlyArray<Op>) => {
  let total = 0
  for (const op of ops) total += op.k(op.x)
  return total
}

const batch = (makers: ReadonlyArray<Maker>): number => {
  const t0 = performance.now()
  const ops: Array<Op> = []
  for (let i = 0; i < CALLS; i++) ops.push(makers[i % SITES]!(i))
  runLoop(ops)
  return ((performance.now() - t0) * 1000) / CALLS
}

const measure = (makers: ReadonlyArray<Maker>) => {
  for (let i = 0; i < 300; i++) batch(makers)
  const before: Array<number> = []
  const after: Array<Array<number>> = Array.from({ length: BATCHES_AFTER }, () => [])
  for (let r = 0; r < ROUNDS; r++) {
    before.push(batch(makers))
    gc()
    for (let b = 0; b < BATCHES_AFTER; b++) after[b]!.push(batch(makers))
    // back to warm before the next round
    for (let i = 0; i < 50; i++) batch(makers)
  }
  const warm = median(before)
  return {
    usPerCallWarm: round(warm, 3),
    usPerCallAfterGc: after.map((xs) => round(median(xs), 3)),
    firstBatchAfterGcOverWarm: round(median(after[0]!) / warm, 2)
  }
}

const result = {
  what: `${CALLS} continuations per batch over ${SITES} sites; medians of ${ROUNDS} rounds; the batches after gc() in order`,
  node: process.version,
  perCall: measure(perCall),
  module: measure(module_)
}
const here = path.dirname(fileURLToPath(import.meta.url))
const root = path.resolve(here, "..", fs.existsSync(path.join(here, "..", "package.json")) ? "" : "..")
fs.mkdirSync(path.join(root, "bench", "results"), { recursive: true })
fs.writeFileSync(path.join(root, "bench", "results", "closure-code.json"), JSON.stringify(result, null, 2) + "\n")
process.stdout.write(JSON.stringify(result) + "\n")
