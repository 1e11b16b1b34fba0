/**
 * Summaries of a V8 CPU profile of a process's start-up (`node --cpu-prof`): where the time went by phase
 * (loading modules: resolve, read, compile, link; evaluating them; GC; the command's own work), which
 * packages and modules cost most to evaluate, and the most expensive functions. Pure functions over the
 * parsed `.cpuprofile` JSON, so that the summary can be tested on a hand-made profile.
 */

/** The `.cpuprofile` JSON (the parts read here). */
export interface CpuProfile {
  readonly nodes: ReadonlyArray<{
    readonly id: number
    readonly callFrame: {
      readonly functionName: string
      readonly url: string
      readonly lineNumber: number
      readonly columnNumber: number
    }
    readonly children?: ReadonlyArray<number>
  }>
  /** Microseconds, on the monotonic clock (CLOCK_MONOTONIC on Linux, as `process.hrtime`). */
  readonly startTime: number
  readonly endTime: number
  readonly samples: ReadonlyArray<number>
  readonly timeDeltas: ReadonlyArray<number>
}

/**
 * Where a sample's time went: loading modules (Node's loader: resolve, read, compile, link), evaluating them
 * (their top-level code), the process's own work in scripts (`run`), Node's internals or natives with no
 * script on the stack (`node`: during start-up mostly the loader's asynchronous file reads), GC, V8's own
 * work (`program`: mostly compiling), or idle.
 */
export type Phase = "load" | "evaluate" | "run" | "node" | "gc" | "program" | "idle"

/** A summary of start-up profiles, averaged over the profiles (milliseconds). */
export interface Summary {
  readonly profiles: number
  /** The profiles' mean length, wall clock (up to the cut, when there is one). */
  readonly wallMs: number
  /**
   * The time summarised: each sample counts the time to the next one, at most `capUs`, so that the time the
   * process spent descheduled on a loaded machine is not charged to the frame it was in (about CPU time).
   */
  readonly sampledMs: number
  /** How many profiles were cut at their `untilUs` (the cut fell inside the profile). */
  readonly cut: number
  readonly phases: { readonly [phase in Phase]: number }
  /** Per package: evaluating its modules, and the work its functions did outside module evaluation. */
  readonly packages: ReadonlyArray<{
    readonly package: string
    readonly evaluateMs: number
    readonly runMs: number
    readonly modulesSampled: number
  }>
  /** The modules whose evaluation (top-level code; modules it loads are counted for themselves) cost most. */
  readonly modules: ReadonlyArray<{ readonly module: string; readonly package: string; readonly evaluateMs: number }>
  /** The functions with the most self time while evaluating or running (not loading). */
  readonly functions: ReadonlyArray<{ readonly function: string; readonly module: string; readonly selfMs: number }>
}

const fileUrlPath = (url: string): string => {
  try {
    return decodeURIComponent(new URL(url).pathname)
  } catch {
    return url
  }
}

/**
 * The package a script belongs to: the package under the innermost `node_modules` (with its scope),
 * `antler` for files under `root`, `node` for Node's own modules, `(native)` for frames without a script.
 */
export const packageOf = (url: string, root: string): string => {
  if (url === "") return "(native)"
  if (url.startsWith("node:")) return "node"
  const file = url.startsWith("file:") ? fileUrlPath(url) : url
  const at = file.lastIndexOf("/node_modules/")
  if (at >= 0) {
    const parts = file.slice(at + "/node_modules/".length).split("/")
    return parts[0]!.startsWith("@") && parts.length > 1 ? `${parts[0]}/${parts[1]}` : parts[0]!
  }
  const base = root.endsWith("/") ? root : `${root}/`
  return file.startsWith(base) ? "antler" : "other"
}

/** A script's name for display: relative to its package's folder (`effect/dist/esm/Schema.js`), or to `root`. */
export const moduleName = (url: string, root: string): string => {
  if (url === "" || url.startsWith("node:")) return url || "(native)"
  const file = url.startsWith("file:") ? fileUrlPath(url) : url
  const at = file.lastIndexOf("/node_modules/")
  if (at >= 0) return file.slice(at + "/node_modules/".length)
  const base = root.endsWith("/") ? root : `${root}/`
  return file.startsWith(base) ? file.slice(base.length) : file
}

type Frame = CpuProfile["nodes"][number]["callFrame"]

/** Whether a frame is a module's top-level code (an ES module's body or a CommonJS module's wrapper). */
const isModuleBody = (frame: Frame): boolean =>
  frame.functionName === "" && frame.url.startsWith("file:") && frame.lineNumber === 0 && frame.columnNumber === 0

/** Node's module loader (resolve, read, compile, link, and the loop that evaluates modules). */
const isLoader = (url: string): boolean => url.startsWith("node:internal/modules/")

const ms = (us: number): number => Math.round(us / 10) / 100

interface Context {
  /** The innermost module body on the stack. */
  readonly module?: string
  /** Whether the loader is on the stack above that module body (a `require` inside it), or anywhere if none. */
  readonly loading: boolean
  /** The innermost frame with a script (not Node's, not native). */
  readonly script?: string
}

/** Each node's context, from the root down. */
const contexts = (profile: CpuProfile): Map<number, Context> => {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]))
  const out = new Map<number, Context>()
  const first = profile.nodes[0]
  const stack: Array<readonly [number, Context]> = first === undefined ? [] : [[first.id, { loading: false }]]
  while (stack.length > 0) {
    const [id, parent] = stack.pop()!
    const node = byId.get(id)
    if (node === undefined) continue
    const frame = node.callFrame
    const here: Context = {
      ...parent,
      ...(isModuleBody(frame) ? { module: frame.url } : {}),
      ...(frame.url !== "" && !frame.url.startsWith("node:") ? { script: frame.url } : {}),
      loading: isModuleBody(frame) ? false : parent.loading || isLoader(frame.url)
    }
    out.set(id, here)
    for (const child of node.children ?? []) stack.push([child, here])
  }
  return out
}

/**
 * Summarises start-up profiles (the mean over them). Each sample's time goes to one phase (see `Phase`):
 * inside a module's top-level code it is that module's evaluation, unless the loader runs above it (a
 * CommonJS `require` loading and compiling another module is loading; the required module's body is its own
 * evaluation); else inside Node's loader it is loading; else GC, program, idle, or the run, counted for the
 * package of the innermost frame with a script (`node` when there is none). A profile's `untilUs` (on the
 * profile's clock) drops its later samples.
 *
 * `bundles`: the URLs of bundled files (esbuild's output, one module body running the top-level code of every
 * module bundled in it) whose other frames were mapped to their sources (see sourceMap.ts): time in such a body
 * is charged to the module of the innermost mapped frame, so evaluation is counted per original module.
 */
export const summarize = (
  profiles: ReadonlyArray<{ readonly profile: CpuProfile; readonly untilUs?: number | undefined }>,
  options: {
    readonly root: string
    readonly capUs?: number
    readonly top?: number
    readonly bundles?: ReadonlyArray<string>
  }
): Summary => {
  const bundles = new Set(options.bundles ?? [])
  const top = options.top ?? 15
  const cap = options.capUs ?? Number.POSITIVE_INFINITY
  const phases: Record<Phase, number> = { load: 0, evaluate: 0, run: 0, node: 0, gc: 0, program: 0, idle: 0 }
  const evaluate = new Map<string, number>()
  const run = new Map<string, number>()
  const functions = new Map<string, { function: string; module: string; us: number }>()
  let cut = 0
  let sampled = 0
  let wall = 0
  for (const { profile, untilUs } of profiles) {
    const byId = new Map(profile.nodes.map((n) => [n.id, n]))
    const context = contexts(profile)
    const end = untilUs !== undefined && untilUs < profile.endTime ? untilUs : profile.endTime
    if (end < profile.endTime) cut++
    wall += Math.max(0, end - profile.startTime)
    let t = profile.startTime
    for (let i = 0; i < profile.samples.length; i++) {
      t += profile.timeDeltas[i] ?? 0
      if (t > end) break
      const next = Math.min(end, i + 1 < profile.samples.length ? t + (profile.timeDeltas[i + 1] ?? 0) : profile.endTime)
      const weight = Math.min(cap, Math.max(0, next - t))
      const id = profile.samples[i]!
      const node = byId.get(id)
      const ctx = context.get(id)
      if (node === undefined || ctx === undefined) continue
      sampled += weight
      const frame = node.callFrame
      let phase: Phase
      if (frame.functionName === "(garbage collector)") phase = "gc"
      else if (frame.functionName === "(program)") phase = "program"
      else if (frame.functionName === "(idle)") phase = "idle"
      else if (ctx.loading) phase = "load"
      else if (ctx.module !== undefined) phase = "evaluate"
      else if (ctx.script !== undefined) phase = "run"
      else phase = "node"
      phases[phase] += weight
      if (phase === "evaluate") {
        const module = bundles.has(ctx.module!) && ctx.script !== undefined ? ctx.script : ctx.module!
        evaluate.set(module, (evaluate.get(module) ?? 0) + weight)
      }
      if (phase === "run") run.set(ctx.script!, (run.get(ctx.script!) ?? 0) + weight)
      if (phase === "evaluate" || phase === "run") {
        const fn = frame.functionName === "" ? (isModuleBody(frame) ? "(module body)" : "(anonymous)") : frame.functionName
        const key = `${fn}\u0000${frame.url}\u0000${frame.lineNumber}`
        const f = functions.get(key) ??
          { function: fn, module: `${moduleName(frame.url, options.root)}:${frame.lineNumber + 1}`, us: 0 }
        f.us += weight
        functions.set(key, f)
      }
    }
  }

  const n = Math.max(1, profiles.length)
  const mean = (us: number) => ms(us / n)
  const packages = new Map<string, { evaluate: number; run: number; modules: number }>()
  const entry = (pkg: string) => {
    let e = packages.get(pkg)
    if (e === undefined) packages.set(pkg, (e = { evaluate: 0, run: 0, modules: 0 }))
    return e
  }
  for (const [url, us] of evaluate) {
    const e = entry(packageOf(url, options.root))
    e.evaluate += us
    e.modules++
  }
  for (const [url, us] of run) entry(packageOf(url, options.root)).run += us

  return {
    profiles: profiles.length,
    wallMs: mean(wall),
    sampledMs: mean(sampled),
    cut,
    phases: {
      load: mean(phases.load),
      evaluate: mean(phases.evaluate),
      run: mean(phases.run),
      node: mean(phases.node),
      gc: mean(phases.gc),
      program: mean(phases.program),
      idle: mean(phases.idle)
    },
    packages: [...packages]
      .map(([pkg, e]) => ({ package: pkg, evaluateMs: mean(e.evaluate), runMs: mean(e.run), modulesSampled: e.modules }))
      .sort((a, b) => b.evaluateMs + b.runMs - (a.evaluateMs + a.runMs))
      .slice(0, top),
    modules: [...evaluate]
      .map(([url, us]) => ({ module: moduleName(url, options.root), package: packageOf(url, options.root), evaluateMs: mean(us) }))
      .sort((a, b) => b.evaluateMs - a.evaluateMs)
      .slice(0, top),
    functions: [...functions.values()]
      .map((f) => ({ function: f.function, module: f.module, selfMs: mean(f.us) }))
      .sort((a, b) => b.selfMs - a.selfMs)
      .slice(0, top)
  }
}

/** The modules a process loaded, grouped by package: how many and how many kilobytes of source. */
export const groupModules = (
  modules: ReadonlyArray<{ readonly url: string; readonly bytes: number }>,
  root: string
): ReadonlyArray<{ readonly package: string; readonly modules: number; readonly kB: number }> => {
  const byPackage = new Map<string, { modules: number; bytes: number }>()
  const seen = new Set<string>()
  for (const m of modules) {
    if (seen.has(m.url)) continue
    seen.add(m.url)
    const pkg = packageOf(m.url, root)
    const e = byPackage.get(pkg) ?? { modules: 0, bytes: 0 }
    e.modules++
    e.bytes += m.bytes
    byPackage.set(pkg, e)
  }
  return [...byPackage]
    .map(([pkg, e]) => ({ package: pkg, modules: e.modules, kB: Math.round(e.bytes / 1024) }))
    .sort((a, b) => b.kB - a.kB)
}
