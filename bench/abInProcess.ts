/**
 * Two or more builds in one process, turn by turn: each build's harness (`common.ts`'s `makeHarness`, loaded from
 * the build's `dist-bench/`) runs a W1 run (200 steps) or a W4 round (100 threads x 20 steps) in turn, the order
 * reversed every other repetition, and the process's CPU time per step is taken for each. No forced GC.
 *
 * On a loaded machine this is the steadier A/B: the builds share the process, so they share the load's swings,
 * which `bench:ab` (a process per job) cannot give them. They also share Effect's module and the JIT's work on it:
 * a figure for comparing builds that differ in Antler's code, not a figure of either build alone.
 *
 *   node dist-bench/bench/abInProcess.js w1|w4 full|bare memory|sqlite <repetitions> <dist-bench dir> ...
 *   e.g. node dist-bench/bench/abInProcess.js w4 full memory 12 /tmp/before/dist-bench dist-bench
 */
import * as path from "node:path"
import { pathToFileURL } from "node:url"
import type { Chain, Store } from "./common.js"

const [kind, chain, store, repetitions, ...dirs] = process.argv.slice(2)
if ((kind !== "w1" && kind !== "w4") || dirs.length === 0) {
  process.stderr.write("usage: abInProcess.js w1|w4 full|bare memory|sqlite <repetitions> <dist-bench dir> ...\n")
  process.exit(2)
}

interface Build {
  readonly name: string
  readonly harness: {
    readonly run: (threadId: string, steps: number, input: ReadonlyArray<unknown>) => Promise<unknown>
    readonly close: () => Promise<unknown>
  }
  readonly human: (text: string) => unknown
  readonly cpu: Array<number>
}

const builds: Array<Build> = []
for (const dir of dirs) {
  const at = (file: string) => pathToFileURL(path.resolve(dir, file)).href
  const common = await import(at("bench/common.js"))
  const messages = await import(at("src/state/Message.js"))
  builds.push({
    name: path.relative(process.cwd(), path.resolve(dir, "..")) || ".",
    harness: common.makeHarness(chain as Chain, store as Store),
    human: messages.human,
    cpu: []
  })
}

const turn = async (build: Build, tag: string): Promise<number> => {
  const go = (threadId: string, steps: number) =>
    build.harness.run(threadId, steps, [build.human("Refactor the workspace.")])
  const c0 = process.cpuUsage()
  let steps: number
  if (kind === "w1") {
    await go(tag, 200)
    steps = 200
  } else {
    await Promise.all(Array.from({ length: 100 }, (_, i) => go(`${tag}-${i}`, 20)))
    steps = 2000
  }
  const used = process.cpuUsage(c0)
  return (used.user + used.system) / steps
}

for (let r = 0; r < 3; r++) for (const build of builds) await turn(build, `warm-${r}`)
for (let r = 0; r < Number(repetitions); r++) {
  for (const build of r % 2 === 0 ? builds : [...builds].reverse()) build.cpu.push(await turn(build, `r${r}`))
}
const median = (xs: ReadonlyArray<number>) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!
const base = median(builds[0]!.cpu)
for (const build of builds) {
  const m = median(build.cpu)
  process.stdout.write(
    `${kind} ${chain}+${store} ${build.name}: CPU µs/step median ${m.toFixed(1)} ` +
      `(min ${Math.min(...build.cpu).toFixed(1)}) ×${(m / base).toFixed(3)}\n`
  )
}
for (const build of builds) await build.harness.close()
