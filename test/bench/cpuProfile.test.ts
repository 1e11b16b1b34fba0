/**
 * The start-up profile summary: each sample's time goes to the phase and module a reader would charge it to.
 */
import { assert, describe, it } from "@effect/vitest"
import type { CpuProfile } from "../../bench/cpuProfile.js"
import * as P from "../../bench/cpuProfile.js"

const ROOT = "/repo"
const frame = (functionName: string, url: string, lineNumber = 0, columnNumber = 0) =>
  ({ functionName, url, lineNumber, columnNumber })

/**
 * root
 * ├─ (program) 2, (garbage collector) 3, (idle) 4
 * ├─ _link [loader] 5
 * ├─ run [loader] 6
 * │  ├─ module body dist/a.js 7
 * │  │  └─ make effect/Schema.js 8
 * │  └─ module body @scope/pkg/index.js (CommonJS) 9
 * │     └─ require [loader] 10
 * │        ├─ wrapSafe [loader] 11
 * │        └─ module body @scope/pkg/node_modules/dep/index.js 12
 * ├─ processTicksAndRejections [node] 13
 * │  └─ runLoop effect/Effect.js 14
 * │     └─ fstat [native] 15
 * └─ readFile [node] 16
 */
const nodes: CpuProfile["nodes"] = [
  { id: 1, callFrame: frame("(root)", "", -1, -1), children: [2, 3, 4, 5, 6, 13, 16] },
  { id: 2, callFrame: frame("(program)", "", -1, -1) },
  { id: 3, callFrame: frame("(garbage collector)", "", -1, -1) },
  { id: 4, callFrame: frame("(idle)", "", -1, -1) },
  { id: 5, callFrame: frame("_link", "node:internal/modules/esm/module_job", 80, 2) },
  { id: 6, callFrame: frame("run", "node:internal/modules/esm/module_job", 200, 2), children: [7, 9] },
  { id: 7, callFrame: frame("", "file:///repo/dist/a.js"), children: [8] },
  { id: 8, callFrame: frame("make", "file:///repo/node_modules/effect/dist/esm/Schema.js", 53, 10) },
  { id: 9, callFrame: frame("", "file:///repo/node_modules/@scope/pkg/index.js"), children: [10] },
  { id: 10, callFrame: frame("require", "node:internal/modules/cjs/helpers", 130, 4), children: [11, 12] },
  { id: 11, callFrame: frame("wrapSafe", "node:internal/modules/cjs/loader", 1421, 2) },
  { id: 12, callFrame: frame("", "file:///repo/node_modules/@scope/pkg/node_modules/dep/index.js") },
  { id: 13, callFrame: frame("processTicksAndRejections", "node:internal/process/task_queues", 60, 4), children: [14] },
  { id: 14, callFrame: frame("runLoop", "file:///repo/node_modules/effect/dist/esm/Effect.js", 9, 2), children: [15] },
  { id: 15, callFrame: frame("fstat", "", -1, -1) },
  { id: 16, callFrame: frame("readFile", "node:internal/fs/promises", 500, 2) }
]

/** A profile sampling `sequence` (node id, µs until the next sample), starting at 1,000 µs. */
const profileOf = (sequence: ReadonlyArray<readonly [number, number]>): CpuProfile => {
  const timeDeltas: Array<number> = []
  let previous = 0
  for (const [, us] of sequence) {
    timeDeltas.push(previous)
    previous = us
  }
  const total = sequence.reduce((a, [, us]) => a + us, 0)
  return { nodes, startTime: 1_000, endTime: 1_000 + total, samples: sequence.map(([id]) => id), timeDeltas }
}

const sequence: ReadonlyArray<readonly [number, number]> = [
  [5, 400], // loading (ESM link)
  [7, 100], // a.js's own top-level code
  [8, 300], // a.js calling effect's Schema.make at top level: a.js's evaluation
  [11, 200], // the CommonJS require compiling dep: loading, though inside pkg's evaluation
  [12, 50], // dep's own top level
  [9, 150], // pkg's own top level
  [2, 60],
  [3, 70],
  [4, 10],
  [15, 90], // a native call from effect's code: effect's run
  [16, 30] // Node's file read with no script on the stack
]

describe("packageOf / moduleName", () => {
  it("name the innermost package (with its scope), Antler's own files, Node and natives", () => {
    assert.strictEqual(P.packageOf("file:///repo/node_modules/@scope/pkg/node_modules/dep/x.js", ROOT), "dep")
    assert.strictEqual(P.packageOf("file:///repo/node_modules/@effect/cli/dist/esm/a.js", ROOT), "@effect/cli")
    assert.strictEqual(P.packageOf("file:///repo/dist/programs/Cli.js", ROOT), "antler")
    assert.strictEqual(P.packageOf("file:///elsewhere/x.js", ROOT), "other")
    assert.strictEqual(P.packageOf("node:fs", ROOT), "node")
    assert.strictEqual(P.packageOf("", ROOT), "(native)")
    assert.strictEqual(P.moduleName("file:///repo/node_modules/effect/dist/esm/Schema.js", ROOT), "effect/dist/esm/Schema.js")
    assert.strictEqual(P.moduleName("file:///repo/dist/a.js", ROOT), "dist/a.js")
  })
})

describe("summarize", () => {
  it("charges each sample to its phase, module and package", () => {
    const s = P.summarize([{ profile: profileOf(sequence) }], { root: ROOT })
    assert.deepStrictEqual(s.phases, { load: 0.6, evaluate: 0.6, run: 0.09, node: 0.03, gc: 0.07, program: 0.06, idle: 0.01 })
    assert.strictEqual(s.sampledMs, 1.46)
    assert.strictEqual(s.cut, 0)
    assert.deepStrictEqual(s.modules, [
      { module: "dist/a.js", package: "antler", evaluateMs: 0.4 },
      { module: "@scope/pkg/index.js", package: "@scope/pkg", evaluateMs: 0.15 },
      { module: "dep/index.js", package: "dep", evaluateMs: 0.05 }
    ])
    assert.deepStrictEqual(s.packages, [
      { package: "antler", evaluateMs: 0.4, runMs: 0, modulesSampled: 1 },
      { package: "@scope/pkg", evaluateMs: 0.15, runMs: 0, modulesSampled: 1 },
      { package: "effect", evaluateMs: 0, runMs: 0.09, modulesSampled: 0 },
      { package: "dep", evaluateMs: 0.05, runMs: 0, modulesSampled: 1 }
    ])
    assert.deepStrictEqual(s.functions[0], { function: "make", module: "effect/dist/esm/Schema.js:54", selfMs: 0.3 })
  })

  it("cuts a profile at untilUs, caps each sample's time, and averages over profiles", () => {
    const profile = profileOf(sequence)
    // the first three samples start at 1,000, 1,400 and 1,500 µs: cut at 1,600 keeps 400 + 100 + 100
    const cut = P.summarize([{ profile, untilUs: 1_600 }], { root: ROOT })
    assert.strictEqual(cut.cut, 1)
    assert.strictEqual(cut.sampledMs, 0.6)
    assert.deepInclude(cut.phases, { load: 0.4, evaluate: 0.2 })
    // a cap of 100 µs a sample (a process descheduled on a loaded machine is not charged for it)
    const capped = P.summarize([{ profile }], { root: ROOT, capUs: 100 })
    assert.deepInclude(capped.phases, { load: 0.2, evaluate: 0.35 })
    const twice = P.summarize([{ profile }, { profile, untilUs: 1_600 }], { root: ROOT })
    assert.strictEqual(twice.profiles, 2)
    assert.strictEqual(twice.sampledMs, (1.46 + 0.6) / 2)
  })

  it("groups the loaded modules by package, once each", () => {
    const grouped = P.groupModules([
      { url: "file:///repo/node_modules/effect/dist/esm/Schema.js", bytes: 300_000 },
      { url: "file:///repo/node_modules/effect/dist/esm/Effect.js", bytes: 100_000 },
      { url: "file:///repo/node_modules/effect/dist/esm/Effect.js", bytes: 100_000 },
      { url: "file:///repo/dist/a.js", bytes: 2_048 }
    ], ROOT)
    assert.deepStrictEqual(grouped, [
      { package: "effect", modules: 2, kB: 391 },
      { package: "antler", modules: 1, kB: 2 }
    ])
  })
})
