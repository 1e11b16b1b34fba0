/**
 * Shared pieces of the benchmark, on the workload contract of ../shared/bench/peer-langchain/README.md:
 * - a step is one model turn returning exactly one `read_file({path})` call with a distinct path, plus its
 *   execution (2 messages appended); the run ends with one text turn `done after N steps`;
 * - the model is SCRIPTED and decides in O(1) from the last message only;
 * - `read_file` returns exactly 100 characters computed from the path, instantly.
 * Only the harness is measured: the lead agent's middleware chain, the loop, the reducers and the store.
 */
import * as fs from "node:fs"
import { createRequire } from "node:module"
import * as os from "node:os"
import * as path from "node:path"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as ManagedRuntime from "effect/ManagedRuntime"
import * as Option from "effect/Option"
import * as Either from "effect/Either"
import * as Schema from "effect/Schema"
import * as LocalSandbox from "../src/layers/LocalSandbox.js"
import * as ChainM from "../src/middleware/Chain.js"
import * as DynamicContext from "../src/middleware/DynamicContext.js"
import * as MemoryThreadStore from "../src/layers/MemoryThreadStore.js"
import * as ScriptedModel from "../src/layers/ScriptedModel.js"
import * as SqliteThreadStore from "../src/layers/SqliteThreadStore.js"
import * as Toolkit from "../src/layers/Toolkit.js"
import * as MW from "../src/middleware/Middleware.js"
import * as LeadAgent from "../src/programs/LeadAgent.js"
import * as Run from "../src/programs/Run.js"
import type { AppConfig } from "../src/services/AppConfig.js"
import { AppConfigService, AppConfigSchema } from "../src/services/AppConfig.js"
import type { ModelRequest } from "../src/services/ModelService.js"
import { ModelService } from "../src/services/ModelService.js"
import { AgentHooks } from "../src/services/AgentHooks.js"
import { ToolService } from "../src/services/ToolService.js"
import { ThreadStore } from "../src/services/ThreadStore.js"
import * as Tool from "../src/services/Tool.js"
import type { Message } from "../src/state/Message.js"
import * as M from "../src/state/Message.js"
import * as ReadMark from "../src/state/ReadMark.js"
import { absoluteVirtual } from "../src/services/Sandbox.js"

export const TOOL_OUTPUT_CHARS = 100

/** Deterministic 100-character tool output for a path. */
export const fileContent = (p: string): string => `${p}:${"abcdefghij".repeat(12)}`.slice(0, TOOL_OUTPUT_CHARS)

export const pathFor = (k: number): string => `/mnt/user-data/workspace/src/module_${k}.ts`

/** Timestamps and counters the tool and the store record while a run goes. */
export const probe = {
  stamps: [] as Array<number>,
  appendMs: 0,
  appends: 0,
  /** What was appended, serialised only when `appendBytes` is read (after the timed run, not inside it). */
  appended: [] as Array<unknown>,
  get appendBytes(): number {
    let bytes = 0
    for (const updates of this.appended) bytes += JSON.stringify(updates).length
    return bytes
  },
  reset() {
    this.stamps = []
    this.appendMs = 0
    this.appends = 0
    this.appended = []
  }
}

const readFile = Tool.make({
  name: "read_file",
  description: "Reads a file (benchmark stand-in: 100 characters from the path).",
  parameters: Schema.Struct({ path: Schema.String }),
  readOnly: true,
  marksReads: true,
  // Like the sandbox's read_file, it stamps its result with the read mark of what it read (ReadBeforeWrite
  // then has nothing to read again): the step measured is the lead agent's read_file step, minus the disk.
  handler: ({ path: p }, call) =>
    Effect.sync(() => {
      probe.stamps.push(performance.now())
      const content = fileContent(p)
      const { message } = Tool.toResult(call, content)
      return { message: ReadMark.withMark(message, { path: absoluteVirtual(p), hash: ReadMark.contentHash(content) }) }
    })
})

const usage = { input_tokens: 10, output_tokens: 5, total_tokens: 15 }

/** The SCRIPTED model of the contract: O(1) from the last message. */
export const script = (steps: number) => (request: ModelRequest) => {
  const last = request.messages[request.messages.length - 1]
  let k = 0
  if (last?.type === "tool" && last.tool_call_id.startsWith("call_")) k = Number(last.tool_call_id.slice(5)) + 1
  if (k < steps) {
    return { toolCalls: [{ name: "read_file", args: { path: pathFor(k) }, id: `call_${k}` }], usage }
  }
  return { content: `done after ${k} steps`, usage }
}

/**
 * A thread of `length` messages, as the peers seed theirs: a human message, AI tool-call / 100-character
 * result pairs, then human "continue" messages up to the length (so no tool call is left without its result).
 */
export const seedThread = (length: number, tag: string): ReadonlyArray<Message> => {
  const out: Array<Message> = [M.human("Refactor the workspace.", { id: `${tag}-h` })]
  for (let i = 0; out.length + 2 <= length - 1; i++) {
    out.push(M.ai("", {
      id: `${tag}-a${i}`,
      tool_calls: [{ id: `seed_${tag}_${i}`, name: "read_file", args: { path: `/seed/${i}` } }],
      usage_metadata: usage
    }))
    out.push(M.tool(fileContent(`/seed/${i}`), `seed_${tag}_${i}`, { id: `${tag}-t${i}`, name: "read_file" }))
  }
  for (let i = 0; out.length < length; i++) out.push(M.human("continue", { id: `${tag}-c${i}` }))
  return out
}

export type Chain = "bare" | "full"
export type Store = "memory" | "sqlite"

/** The configuration the full chain runs with: every guard on, checking on every call but never firing. */
export const benchConfig = (home: string): AppConfig =>
  Schema.decodeUnknownSync(AppConfigSchema)({
    summarization: { enabled: true, trigger: [{ type: "tokens", value: 1_000_000_000 }] },
    token_budget: { enabled: true, max_tokens: 1_000_000_000 },
    // the workload calls read_file hundreds of times per run by design: raise the per-tool limits (as the peers
    // raise theirs to 1e9), while the identical-call detector still hashes every response
    loop_detection: { tool_freq_warn: 1_000_000_000, tool_freq_hard_limit: 1_000_000_000 },
    models: [{ name: "scripted", model: "scripted" }],
    sandbox: { allow_host_bash: false },
    skills: { path: path.join(home, "skills") }
  }) as AppConfig

/**
 * `BENCH_DROP=A,B` leaves these entries out of the full chain (by name, as `LeadAgent.order` lists them): what a
 * middleware costs is the difference it makes (e.g. `BENCH_DROP=ReadBeforeWrite npm run bench -- w1/full`).
 */
const dropped = (chain: ChainM.Chain): Either.Either<ChainM.Chain, ChainM.ChainError> =>
  (process.env.BENCH_DROP ?? "").split(",").map((name) => name.trim()).filter((name) => name !== "").reduce(
    (acc, name) => Either.flatMap(acc, (c) => ChainM.drop(c, name)),
    Either.right(chain) as Either.Either<ChainM.Chain, ChainM.ChainError>
  )

/** A harness set up for one benchmark job: a runtime with the store and app services, and `run`. */
export const makeHarness = (chain: Chain, store: Store) => {
  const home = fs.mkdtempSync(path.join(os.tmpdir(), "antler-bench-"))
  const config = benchConfig(home)
  const dbFile = path.join(home, "antler.sqlite")
  const storeLayer = store === "memory"
    ? MemoryThreadStore.layer()
    : SqliteThreadStore.layer({ filename: dbFile })
  const instrumented = Layer.effect(
    ThreadStore,
    Effect.map(ThreadStore, (inner) =>
      ThreadStore.of({
        ...inner,
        // (timed on success only, with one effect step: a failed append fails the run, and the job with it)
        append: (threadId, runId, updates, options) =>
          Effect.suspend(() => {
            const t0 = performance.now()
            probe.appended.push(updates)
            return Effect.map(inner.append(threadId, runId, updates, options), () => {
              probe.appendMs += performance.now() - t0
              probe.appends++
            })
          })
      }))
  ).pipe(Layer.provide(storeLayer))
  const appLayer = Layer.mergeAll(
    instrumented,
    LocalSandbox.layer().pipe(Layer.provideMerge(Layer.succeed(AppConfigService, { config, source: undefined, ignored: [], home })))
  )
  // The scripted model's run length: set before each run (every concurrent run of a job has the same).
  let steps = 0
  const model = ScriptedModel.make((request) => script(steps)(request))
  const tools = Toolkit.make([readFile])
  // bare: the loop over the model and the tool; full: the lead agent, built once, as an app builds it
  const agentLayer = LeadAgent.layer({ sandboxTools: false, tools: [readFile], systemPrompt: "", chain: dropped }).pipe(
    Layer.provide(Layer.succeed(ModelService, model))
  )
  const runtime = ManagedRuntime.make(Layer.merge(appLayer, agentLayer.pipe(Layer.provide(appLayer))))
  const bare = Context.make(ModelService, model).pipe(
    Context.add(ToolService, tools),
    Context.add(AgentHooks, MW.noHooks)
  )
  const options = { modelName: "scripted", recursionLimit: 100_000 }

  const run = (threadId: string, n: number, input: ReadonlyArray<Message>) => {
    steps = n
    return runtime.runPromise(
      chain === "bare"
        ? Run.execute({ threadId, input, options }, bare)
        : Effect.flatMap(LeadAgent.LeadAgent, (agent) => agent.turn({ threadId, messages: input, options }))
    )
  }

  const seed = (threadId: string, messages: ReadonlyArray<Message>) =>
    runtime.runPromise(Effect.flatMap(ThreadStore, (s) => s.append(threadId, "seed", [{ messages }])))

  const messageCount = (threadId: string) =>
    runtime.runPromise(
      Effect.map(Effect.flatMap(ThreadStore, (s) => s.load(threadId)), (loaded) => {
        // the full chain's hidden date reminder (DynamicContext, once per thread and day) is not the workload's
        const messages = Option.getOrThrow(loaded).state.messages.filter((m) => !DynamicContext.isReminder(m))
        const last = messages[messages.length - 1]
        return { count: messages.length, text: last ? M.text(last) : "" }
      })
    )

  /**
   * Closes the store (SQLite folds its write-ahead log into the file) and returns the database file's size and
   * the bytes of the pages holding checkpoints (table and index; the rest is thread, run and snapshot rows).
   */
  const close = async (): Promise<{ file: number; checkpoints: number }> => {
    await runtime.dispose()
    let sizes = { file: 0, checkpoints: 0 }
    if (store === "sqlite" && fs.existsSync(dbFile)) {
      const Database = createRequire(import.meta.url)("better-sqlite3")
      const db = new Database(dbFile, { readonly: true })
      const pages = db.prepare(
        "SELECT SUM(pgsize) AS bytes FROM dbstat WHERE name IN ('checkpoints', 'checkpoints_by_thread')"
      ).get() as { bytes: number }
      db.close()
      sizes = { file: fs.statSync(dbFile).size, checkpoints: pages.bytes }
    }
    fs.rmSync(home, { recursive: true, force: true })
    return sizes
  }

  return { run, seed, messageCount, close, home }
}

// ---------------------------------------------------------------------------------------------------------
// stats

export const median = (xs: ReadonlyArray<number>): number => round(medianRaw(xs), 2)
const medianRaw = (xs: ReadonlyArray<number>): number => {
  const s = [...xs].sort((a, b) => a - b)
  const m = Math.floor(s.length / 2)
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2
}
export const round = (x: number, digits = 1): number => Math.round(x * 10 ** digits) / 10 ** digits
export const mib = (bytes: number): number => round(bytes / 2 ** 20, 1)
export const intervalsUs = (stamps: ReadonlyArray<number>): Array<number> =>
  stamps.slice(1).map((t, i) => (t - stamps[i]!) * 1000)
export const gc = (): void => (globalThis as { gc?: () => void }).gc?.()
export const cpuUs = (usage: NodeJS.CpuUsage): number => usage.user + usage.system
