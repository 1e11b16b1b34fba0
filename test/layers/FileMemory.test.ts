/**
 * File memory: writes that survive a SIGKILL mid-write (a child process killed while it rewrites the file),
 * the lock between processes, and the app's update queue: debounced on the Clock, one internal model call per
 * update (never streamed), the thread's turns read once, failures leaving memory as it was, token usage added
 * to the thread under `memory`, and pending updates run when the app stops.
 */
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import { assert, describe, it } from "@effect/vitest"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as FiberId from "effect/FiberId"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as Option from "effect/Option"
import * as Scope from "effect/Scope"
import * as TestClock from "effect/TestClock"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"
import * as ConfigFile from "../../src/layers/ConfigFile.js"
import * as FileMemory from "../../src/layers/FileMemory.js"
import * as MemoryThreadStore from "../../src/layers/MemoryThreadStore.js"
import * as ScriptedModel from "../../src/layers/ScriptedModel.js"
import { Memory } from "../../src/services/Memory.js"
import type { ModelRequest } from "../../src/services/ModelService.js"
import { ModelService } from "../../src/services/ModelService.js"
import { ThreadStore } from "../../src/services/ThreadStore.js"
import * as M from "../../src/state/Message.js"
import * as MemoryDoc from "../../src/state/Memory.js"
import { tempDirs } from "../support/fixtures.js"
import { captureLogs } from "../support/logs.js"

const tempDir = tempDirs()
const ROOT = Path.resolve(Path.dirname(fileURLToPath(import.meta.url)), "../..")
const TSX = pathToFileURL(Path.join(ROOT, "node_modules/tsx/dist/loader.mjs")).href
const WRITER = Path.join(ROOT, "test/fixtures/memory-writer.ts")

const decode = (file: string) => MemoryDoc.decodeDocument(Fs.readFileSync(file, "utf8"))

/** Starts the writer and kills it with SIGKILL right after it announces revision `at` (0-3 ms later). */
const killDuringWrite = (file: string, at: number) =>
  new Promise<{ killedAt: number }>((resolve, reject) => {
    const child = ChildProcess.spawn(process.execPath, ["--import", TSX, WRITER, file], {
      stdio: ["ignore", "pipe", "pipe"]
    })
    let out = ""
    let killedAt = -1
    child.stdout!.on("data", (chunk: Buffer) => {
      out += chunk.toString("utf8")
      if (killedAt >= 0) return
      const match = new RegExp(`writing (${at})\\n`).exec(out)
      if (match === null) return
      killedAt = at
      const kill = () => child.kill("SIGKILL")
      const delay = Math.floor(Math.random() * 4)
      if (delay === 0) kill()
      else setTimeout(kill, delay)
    })
    child.on("error", reject)
    child.on("close", (_code, signal) => {
      if (signal !== "SIGKILL") reject(new Error(`the writer ended without being killed: ${out.slice(-200)}`))
      else resolve({ killedAt })
    })
  })

describe("memory files", () => {
  it.live("a SIGKILL during the write leaves the previous memory file whole (or the new one), never a mix", () =>
    Effect.promise(async () => {
      const file = Path.join(tempDir("antler-memkill-"), "users", "default", "memory.json")
      for (let round = 0; round < 4; round++) {
        const { killedAt } = await killDuringWrite(file, 2 + (round % 2))
        const doc = Either.getOrThrow(decode(file))
        const revision = Number(doc.lastUpdated)
        // the file holds a revision that was completely written: the one before the kill, or the one killed
        assert.oneOf(revision, [killedAt - 1, killedAt], `round ${round}`)
        assert.strictEqual(doc.facts.length, 2500)
        assert.isTrue(doc.facts.every((f) => f.content.startsWith(`revision ${revision} `)))
      }
      // temporary files of the killed writers are removed by the next update
      await Effect.runPromise(FileMemory.removeStaleTemps(file).pipe(Effect.provide(NodeFileSystem.layer)))
      assert.deepStrictEqual(Fs.readdirSync(Path.dirname(file)).filter((n) => n.endsWith(".tmp")), [])
    }), 120_000)

  it.effect("a lock left by a dead process is taken over; a live holder makes the update wait, then give up", () =>
    Effect.gen(function*() {
      const file = Path.join(tempDir("antler-memlock-"), "memory.json")
      Fs.writeFileSync(`${file}.lock`, "999999999")
      const value = yield* FileMemory.withLock(file, 1000, Effect.succeed("done"))
      assert.strictEqual(value, "done")
      assert.isFalse(Fs.existsSync(`${file}.lock`))
      Fs.writeFileSync(`${file}.lock`, String(process.pid))
      const error = yield* Effect.flip(FileMemory.withLock(file, 100, Effect.succeed("never")))
      assert.strictEqual(error._tag, "MemoryError")
      assert.strictEqual((error as { reason: string }).reason, "locked")
      assert.include(error.message, `process ${process.pid}`)
    }).pipe(Effect.provide(NodeFileSystem.layer)))

  it.effect("a fact that cannot be read is left out and counted; the rest of the memory is kept, as DeerMem does", () =>
    Effect.gen(function*() {
      const file = Path.join(tempDir("antler-membadfact-"), "memory.json")
      Fs.writeFileSync(file, JSON.stringify({
        user: { workContext: { summary: "Data engineer." } },
        facts: [{ id: "f1", content: 42 }, { id: "f2", content: "Prefers tea." }, "junk"]
      }))
      const read = yield* FileMemory.readCapped(file, { maxFacts: 100, maxFactChars: 1000, maxSummaryChars: 1000 })
      assert.deepStrictEqual(read.value.facts.map((f) => f.content), ["Prefers tea."])
      assert.strictEqual(read.value.user.workContext.summary, "Data engineer.")
      assert.deepStrictEqual(read.cut, ["2 facts that could not be read"])
    }))

  // DeerFlow test_deermem_self_contained.py::test_search_survives_non_float_confidence: a confidence that is not a
  // number (null, "0.9", "high", true) is read as DeerMem reads it (a number's text as that number, else 0.5; kept
  // within 0 and 1), so the fact is kept, and searched in DeerMem's order
  it.effect("a fact whose confidence is not a number is kept, with DeerMem's reading of it", () =>
    Effect.gen(function*() {
      const file = Path.join(tempDir("antler-memconf-"), "memory.json")
      Fs.writeFileSync(file, JSON.stringify({
        facts: [
          { id: "a", content: "alpha matching query", confidence: null },
          { id: "b", content: "bravo matching query", confidence: "0.9" },
          { id: "c", content: "charlie matching query", confidence: "high" },
          { id: "d", content: "delta", confidence: true },
          { id: "e", content: "echo", confidence: 7 },
          { id: "f", content: "foxtrot", confidence: "-1" }
        ]
      }))
      const read = yield* FileMemory.readCapped(file, { maxFacts: 100, maxFactChars: 1000, maxSummaryChars: 1000 })
      assert.deepStrictEqual(read.cut, [])
      assert.deepStrictEqual(read.value.facts.map((f) => [f.id, f.confidence]), [
        ["a", 0.5], ["b", 0.9], ["c", 0.5], ["d", 0.5], ["e", 1], ["f", 0]
      ])
      assert.deepStrictEqual(MemoryDoc.search(read.value, "query", { limit: 10 }).map((f) => f.id), ["b", "a", "c"])
    }))

  it.effect("a damaged file is reported as such, with the file's name; unsafe ids never name a directory", () =>
    Effect.gen(function*() {
      const file = Path.join(tempDir("antler-memcorrupt-"), "memory.json")
      Fs.writeFileSync(file, "{\"facts\": [")
      const error = yield* Effect.flip(FileMemory.readDocument(file))
      assert.strictEqual(error.reason, "corrupt")
      assert.include(error.message, file)
      assert.isTrue(Either.isLeft(FileMemory.fileOf("/data", { userId: "../etc" })))
      assert.isTrue(Either.isLeft(FileMemory.fileOf("/data", { userId: "u", agentName: "a/b" })))
      assert.deepStrictEqual(
        FileMemory.fileOf("/data", { userId: "u1", agentName: "writer" }),
        Either.right("/data/users/u1/agents/writer/memory.json")
      )
    }))
})

// ---------------------------------------------------------------------------------------------------------
// The queue

/** The write gate's labels of a fact that is the user's (DeerFlow test_memory_updater's `_DURABLE_USER_FACT`). */
const USER = { scope: "user", durability: "durable", authority: "descriptive" } as const
/** The same of a summary. */
const USER_SUMMARY = { scope: "user", authority: "descriptive" } as const

const UPDATE = JSON.stringify({
  user: { workContext: { summary: "Data engineer at Acme.", shouldUpdate: true, ...USER_SUMMARY } },
  newFacts: [{ content: "Prefers uv over pip", category: "preference", confidence: 0.95, ...USER }]
})

const conversation = [M.human("I'm a data engineer at Acme and I always use uv, never pip."), M.ai("Noted!")]

const setup = (
  script: ScriptedModel.Script,
  config: Record<string, unknown> = {},
  more: { readonly app?: Record<string, unknown>; readonly generate?: ModelService["Type"]["generate"] } = {}
) =>
  Effect.gen(function*() {
    const home = tempDir("antler-memq-")
    const requests: Array<ModelRequest> = []
    const scripted = ScriptedModel.make(script)
    const generate = more.generate ?? scripted.generate
    const model = ModelService.of({ generate: (r) => Effect.suspend(() => (requests.push(r), generate(r))) })
    const store = MemoryThreadStore.make()
    yield* store.ensure("t1")
    const scope = yield* Scope.make()
    const context = yield* Layer.buildWithScope(
      FileMemory.layer().pipe(
        Layer.provide(Layer.succeed(ModelService, model)),
        Layer.provide(Layer.succeed(ThreadStore, store)),
        Layer.provide(ConfigFile.layerFromObject({ ...more.app, memory: config }, { home })),
        Layer.provide(NodeFileSystem.layer)
      ),
      scope
    )
    const memory = context.pipe((c) => c.unsafeMap.get(Memory.key) as Memory["Type"])
    return { home, memory, requests, store, scope }
  })

/** A pause of real time (the test clock stands still): the event loop runs meanwhile. */
const realPause = Effect.promise(() => new Promise<void>((resolve) => setTimeout(resolve, 10)))

const usage = { input_tokens: 300, output_tokens: 40, total_tokens: 340 }

describe("the memory update queue", () => {
  it.effect("waits debounce_seconds on the Clock, then makes one internal call; the fact is remembered", () =>
    Effect.gen(function*() {
      const { home, memory, requests, store } = yield* setup([{ content: UPDATE, usage }])
      yield* memory.enqueue({ threadId: "t1", userId: "default", messages: conversation, modelName: "main" })
      yield* memory.enqueue({ threadId: "t1", userId: "default", messages: conversation, modelName: "main" })
      assert.strictEqual(yield* memory.pending, 1)
      yield* TestClock.adjust("29 seconds")
      assert.lengthOf(requests, 0)
      yield* TestClock.adjust("1 second")
      // the timer's update runs on its own (no flush); its file writes take real time
      for (let i = 0; i < 1000 && (yield* memory.pending) > 0; i++) yield* realPause
      assert.strictEqual(yield* memory.pending, 0)
      assert.lengthOf(requests, 1)
      const request = requests[0]!
      assert.strictEqual(request.internal, "memory")
      assert.deepStrictEqual(request.tools, [])
      assert.isUndefined(request.systemPrompt)
      assert.strictEqual(request.settings.modelName, "main")
      assert.include(M.text(request.messages[0]!), "I always use uv, never pip.")
      const doc = yield* memory.load({ userId: "default" })
      assert.deepStrictEqual(
        doc.facts.map((f) => [f.content, f.category, f.source]),
        [["Prefers uv over pip", "preference", "t1"]]
      )
      assert.strictEqual(doc.threads.t1, conversation[1]!.id)
      assert.isTrue(Fs.existsSync(Path.join(home, "users", "default", "memory.json")))
      const block = yield* memory.context({ userId: "default" })
      assert.strictEqual(
        block,
        "User Context:\n- Work: Data engineer at Acme.\n\nFacts:\n- [preference | 0.95] Prefers uv over pip"
      )
      // the call's tokens are the thread's, under the purpose `memory`
      const thread = Option.getOrThrow(yield* store.load("t1"))
      assert.deepInclude(thread.state.token_usage?.by_purpose?.memory, { total_tokens: 340, calls: 1 })
      // the same conversation again: nothing new to read, no call
      yield* memory.enqueue({ threadId: "t1", userId: "default", messages: conversation })
      yield* memory.flush
      assert.lengthOf(requests, 1)
    }))

  it.effect("with run_events.track_token_usage: false, the update's call is not booked on the thread", () =>
    Effect.gen(function*() {
      const untracked = { app: { run_events: { track_token_usage: false } } }
      const { memory, requests, store } = yield* setup([{ content: UPDATE, usage }], {}, untracked)
      yield* memory.enqueue({ threadId: "t1", userId: "default", messages: conversation, modelName: "main" })
      yield* memory.flush
      assert.lengthOf(requests, 1)
      assert.deepStrictEqual(
        (yield* memory.load({ userId: "default" })).facts.map((f) => f.content),
        ["Prefers uv over pip"]
      )
      assert.isNull(Option.getOrThrow(yield* store.load("t1")).state.token_usage)
    }))

  it.effect("an answer that is not an update changes nothing, and the turns are read again next time", () =>
    Effect.gen(function*() {
      const { memory, requests } = yield* setup(["I cannot do that.", UPDATE])
      yield* memory.enqueue({ threadId: "t1", userId: "default", messages: conversation })
      yield* memory.flush
      const before = yield* memory.load({ userId: "default" })
      assert.isTrue(MemoryDoc.isEmpty(before))
      assert.isUndefined(before.threads.t1)
      yield* memory.enqueue({ threadId: "t1", userId: "default", messages: conversation })
      yield* memory.flush
      assert.lengthOf(requests, 2)
      assert.lengthOf((yield* memory.load({ userId: "default" })).facts, 1)
    }))

  // DeerFlow test_memory_queue_user_isolation.py (test_queue_keeps_updates_for_different_users_in_same_thread_and_agent,
  // test_queue_still_coalesces_updates_for_same_user_thread_and_agent): one pending update per thread, user and agent
  it.effect("two users' runs of the same thread and agent wait apart, and each user's memory has only their turns", () =>
    Effect.gen(function*() {
      const fact = (content: string) => JSON.stringify({ newFacts: [{ content, confidence: 0.9, ...USER }] })
      const { memory, requests } = yield* setup([fact("Alice uses uv"), fact("Bob uses pip")])
      const said = (text: string) => [M.human(text), M.ai("Noted.")]
      const alice = { threadId: "main", userId: "alice", agentName: "researcher" }
      const bob = { threadId: "main", userId: "bob", agentName: "researcher" }
      yield* memory.enqueue({ ...alice, messages: said("alice first") })
      yield* memory.enqueue({ ...bob, messages: said("bob update") })
      yield* memory.enqueue({ ...alice, messages: said("alice second") })
      assert.strictEqual(yield* memory.pending, 2)
      yield* memory.flush
      assert.lengthOf(requests, 2)
      const prompts = requests.map((r) => M.text(r.messages[0]!))
      assert.include(prompts[0]!, "alice second")
      assert.notInclude(prompts[0]!, "alice first")
      assert.notInclude(prompts[0]!, "bob")
      assert.include(prompts[1]!, "bob update")
      assert.notInclude(prompts[1]!, "alice")
      const facts = (userId: string) =>
        Effect.map(memory.load({ userId, agentName: "researcher" }), (d) => d.facts.map((f) => f.content))
      assert.deepStrictEqual(yield* facts("alice"), ["Alice uses uv"])
      assert.deepStrictEqual(yield* facts("bob"), ["Bob uses pip"])
    }))

  // DeerFlow test_memory_queue.py::test_queue_add_preserves_existing_correction_flag_for_same_thread (its point: a
  // conversation with a signal is never shed): a full queue refuses a new thread's plain conversation, not one whose
  // user corrected the assistant; a thread already waiting is replaced, as ever
  it.effect("a full queue still takes a conversation with a correction", () =>
    Effect.gen(function*() {
      const { memory } = yield* setup([], { backend_config: { queue_max_depth: 1 } })
      const plain = [M.human("Tell me about uv."), M.ai("It installs packages.")]
      yield* memory.enqueue({ threadId: "t1", userId: "default", messages: plain })
      yield* memory.enqueue({ threadId: "t2", userId: "default", messages: plain })
      assert.strictEqual(yield* memory.pending, 1)
      yield* memory.enqueue({ threadId: "t1", userId: "default", messages: [...plain, ...plain] })
      assert.strictEqual(yield* memory.pending, 1)
      const corrected = [...plain, M.human("That's wrong, use make dev instead."), M.ai("Understood.")]
      yield* memory.enqueue({ threadId: "t3", userId: "default", messages: corrected })
      assert.strictEqual(yield* memory.pending, 2)
    }))

  it.effect("a failed update logs a plain message (the CLI's log redaction sees all of it), never a cause object", () =>
    Effect.gen(function*() {
      const { memory } = yield* setup([])
      const logged: Array<unknown> = []
      const causes: Array<Cause.Cause<unknown>> = []
      const logger = Logger.make(({ cause, message }) => {
        logged.push(message)
        causes.push(cause)
      })
      yield* memory.enqueue({ threadId: "t1", userId: "default", messages: conversation })
      yield* memory.flush.pipe(Effect.provide(Logger.replace(Logger.defaultLogger, logger)))
      assert.isAtLeast(logged.length, 1)
      for (const message of logged) {
        const parts = Array.isArray(message) ? message : [message]
        assert.isTrue(parts.every((p) => typeof p === "string"), JSON.stringify(parts))
      }
      assert.isTrue(causes.every(Cause.isEmpty), "no cause object is logged")
      assert.match(String((logged[0] as ReadonlyArray<string>)[0] ?? logged[0]), /^Memory not updated for thread t1/)
    }))

  it.effect("a memory.json too large, or a FIFO, is neither injected nor updated, with a warning naming it and the limit", () =>
    Effect.gen(function*() {
      const { home, memory, requests } = yield* setup([UPDATE, UPDATE])
      const { capture, logged } = captureLogs()
      const file = Path.join(home, "users", "default", "memory.json")
      Fs.mkdirSync(Path.dirname(file), { recursive: true })
      // a valid document over the limit (facts a model never wrote: 17 MiB of them), that would otherwise be injected
      const fact = (i: number) => ({ id: `f${i}`, content: `Remembered fact ${i}: ${"deer ".repeat(36)}`, confidence: 0.9 })
      const big = JSON.stringify({ facts: Array.from({ length: 80_000 }, (_, i) => fact(i)) })
      assert.isAbove(big.length, 17 * 1024 * 1024)
      Fs.writeFileSync(file, big)
      assert.strictEqual(yield* memory.context({ userId: "default" }).pipe(Effect.provide(capture)), "")
      assert.lengthOf(logged, 1)
      assert.include(logged[0], `Memory not injected: Cannot read ${file}: too large`)
      assert.include(logged[0], "over the limit of 16 MiB")
      yield* memory.enqueue({ threadId: "t1", userId: "default", messages: conversation })
      yield* memory.flush.pipe(Effect.provide(capture))
      assert.lengthOf(requests, 0, "no update is asked for")
      assert.include(logged[1], "Memory not updated for thread t1")
      assert.strictEqual(Fs.readFileSync(file, "utf8"), big, "the file is left as it was")
      // a FIFO (nobody writing) is refused at once: the run is not held up
      Fs.rmSync(file)
      ChildProcess.execFileSync("mkfifo", [file])
      assert.strictEqual(yield* memory.context({ userId: "default" }).pipe(Effect.provide(capture)), "")
      assert.include(logged[2], `Cannot read ${file}: not a regular file (a FIFO)`)
    }), 60_000)

  it.effect("a custom agent has its own memory; memory off (or noop) makes no call and injects nothing", () =>
    Effect.gen(function*() {
      const { home, memory } = yield* setup([UPDATE])
      yield* memory.enqueue({ threadId: "t1", userId: "default", agentName: "writer", messages: conversation })
      yield* memory.flush
      assert.lengthOf((yield* memory.load({ userId: "default", agentName: "writer" })).facts, 1)
      assert.lengthOf((yield* memory.load({ userId: "default" })).facts, 0)
      assert.isTrue(Fs.existsSync(Path.join(home, "users", "default", "agents", "writer", "memory.json")))
      for (const config of [{ enabled: false }, { manager_class: "noop" }]) {
        const off = yield* setup([UPDATE], config)
        assert.isFalse(off.memory.enabled)
        yield* off.memory.enqueue({ threadId: "t1", userId: "default", messages: conversation })
        yield* off.memory.flush
        assert.lengthOf(off.requests, 0)
        assert.strictEqual(yield* off.memory.context({ userId: "default" }), "")
      }
    }))

  it.effect("updates still waiting when the app stops are made before it ends", () =>
    Effect.gen(function*() {
      const { memory, requests, scope } = yield* setup([UPDATE])
      yield* memory.enqueue({ threadId: "t1", userId: "default", messages: conversation })
      assert.lengthOf(requests, 0)
      yield* Scope.close(scope, Exit.void)
      assert.lengthOf(requests, 1)
      assert.lengthOf((yield* memory.load({ userId: "default" })).facts, 1)
    }))
})

/** Captures the log lines of an effect (messages only). */
const logsOf = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    const logs: Array<string> = []
    const logger = Logger.make(({ message }) => logs.push(Array.isArray(message) ? message.join(" ") : String(message)))
    const result = yield* effect.pipe(Effect.provide(Logger.replace(Logger.defaultLogger, logger)))
    return { logs, result }
  })

describe("memory tool mode", () => {
  // DeerFlow test_memory_tools.py::TestModeGating::test_tool_mode_disabled_logs_warning_and_uses_middleware
  it.effect("mode tool with memory disabled is a warning; enabled, it is not", () =>
    Effect.gen(function*() {
      const WARNING = "memory.mode is 'tool' but memory.enabled is false; memory tools will not be registered."
      const off = yield* logsOf(setup([], { enabled: false, mode: "tool" }))
      assert.include(off.logs, WARNING)
      assert.isFalse(off.result.memory.enabled)
      const on = yield* logsOf(setup([], { enabled: true, mode: "tool" }))
      assert.notInclude(on.logs, WARNING)
    }))
})

describe("what memory stores", () => {
  const KEY = "sk-test-memory-key-0123456789"

  it.effect("a hostile 2 MB update echoing the key is stored within the limits, redacted; one warning names cuts", () =>
    Effect.gen(function*() {
      const hostile = JSON.stringify({
        user: {
          workContext: { summary: `Their key is ${KEY}. ${"w".repeat(1_000_000)}`, shouldUpdate: true, ...USER_SUMMARY }
        },
        history: { recentMonths: { summary: "r".repeat(500_000), shouldUpdate: true, ...USER_SUMMARY } },
        newFacts: Array.from({ length: 4000 }, (_, i) => ({
          content: `${i} uses ${KEY} ${"f".repeat(100)}`,
          category: "c".repeat(1000),
          confidence: 0.9,
          ...USER
        }))
      })
      assert.isAbove(hostile.length, 2_000_000)
      const limits = { backend_config: { max_fact_chars: 80, max_summary_chars: 2000 } }
      const { home, memory } = yield* setup([hostile], limits, {
        app: { models: [{ name: "main", model: "main-model", api_key: KEY }] }
      })
      yield* memory.enqueue({ threadId: "t1", userId: "default", messages: conversation })
      const { logs } = yield* logsOf(memory.flush)
      const text = Fs.readFileSync(Path.join(home, "users", "default", "memory.json"), "utf8")
      assert.notInclude(text, KEY)
      const doc = JSON.parse(text)
      assert.strictEqual(doc.user.workContext.summary, `Their key is [redacted]. ${"w".repeat(2000 - 25)}`)
      assert.lengthOf(doc.history.recentMonths.summary, 2000)
      assert.lengthOf(doc.facts, 100)
      for (const fact of doc.facts) {
        assert.isAtMost(fact.content.length, 80)
        assert.include(fact.content, " uses [redacted] ")
        assert.lengthOf(fact.category, 200)
      }
      assert.isBelow(text.length, 250_000)
      const warnings = logs.filter((l) => l.startsWith("Memory of user default over its limits"))
      assert.lengthOf(warnings, 1, logs.join("\n"))
      for (
        const part of [
          "3900 of the update's 4000 newFacts (at most max_facts, 100)",
          "the summary history.recentMonths (500,000 characters, kept 2,000 characters)",
          "100 new facts over 80 characters (cut to it)"
        ]
      ) assert.include(warnings[0], part)
      assert.match(warnings[0]!, /the summary user\.workContext \(1,000,\d{3} characters, kept 2,000 characters\)/)
      assert.notInclude(logs.join("\n"), KEY)
    }))

  it.effect("a file over the limits is read cut to them (and redacted); one over MAX_FILE_BYTES is refused (not read at all)", () =>
    Effect.gen(function*() {
      const app = { models: [{ name: "m", model: "m", api_key: KEY }] }
      const { home, memory } = yield* setup([UPDATE], {}, { app })
      const file = Path.join(home, "users", "default", "memory.json")
      Fs.mkdirSync(Path.dirname(file), { recursive: true })
      Fs.writeFileSync(file, JSON.stringify({
        user: { personalContext: { summary: `${KEY} ${"p".repeat(100_000)}` } },
        facts: Array.from({ length: 1000 }, (_, i) => ({ id: `f${i}`, content: "x".repeat(5000), confidence: 0.8 }))
      }))
      const { logs, result: doc } = yield* logsOf(memory.load({ userId: "default" }))
      assert.strictEqual(doc.user.personalContext.summary, `[redacted] ${"p".repeat(4000 - 11)}`)
      assert.lengthOf(doc.facts, 100)
      assert.isTrue(doc.facts.every((f) => f.content.length === 1000))
      assert.lengthOf(logs, 1)
      assert.include(logs[0], "when read (its file is cut at its next update); cut: 900 facts over max_facts (100")
      const block = yield* memory.context({ userId: "default" })
      assert.notInclude(block, KEY)
      // the next write stores it within the limits
      yield* memory.enqueue({ threadId: "t1", userId: "default", messages: conversation })
      yield* memory.flush
      const stored = Fs.readFileSync(file, "utf8")
      assert.notInclude(stored, KEY)
      assert.isBelow(stored.length, 200_000)

      const huge = "t".repeat(FileMemory.MAX_FILE_BYTES)
      Fs.writeFileSync(file, JSON.stringify({ user: { topOfMind: { summary: huge } } }))
      const error = yield* Effect.flip(memory.load({ userId: "default" }))
      assert.strictEqual(error.reason, "io")
      assert.include(error.message, "over the limit of 16 MiB; antler memory clear starts it afresh")
    }))

  it.live("the block of a memory at its limits is prepared in slices: the event loop runs meanwhile", () =>
    Effect.gen(function*() {
      const { home, memory } = yield* setup([])
      // CJK text never tokenized before: over 5 µs a character, a second of tokenizing at the default limits
      let seed = 7
      const cjk = (n: number) =>
        Array.from({ length: n }, () => String.fromCharCode(0x4e00 + ((seed = (seed * 48271) % 2147483647) % 20000)))
          .join("")
      const section = () => ({ summary: cjk(4000) })
      const file = Path.join(home, "users", "default", "memory.json")
      Fs.mkdirSync(Path.dirname(file), { recursive: true })
      Fs.writeFileSync(file, JSON.stringify({
        user: { workContext: section(), personalContext: section(), topOfMind: section() },
        history: { recentMonths: section(), earlierContext: section(), longTermBackground: section() },
        facts: Array.from({ length: 100 }, (_, i) => ({ id: `f${i}`, content: cjk(1000), confidence: 0.8 }))
      }))
      // turns of the event loop while the block is made (each callback schedules the next)
      let turns = 0
      let going = true
      const tick = () => {
        turns++
        if (going) setImmediate(tick)
      }
      setImmediate(tick)
      const block = yield* memory.context({ userId: "default" }).pipe(
        Effect.ensuring(Effect.sync(() => (going = false)))
      )
      assert.isAbove(block.length, 1000)
      assert.isAtLeast(turns, 20)
    }))

  it.live("an app stopped from outside (interrupted) gives a pending update at most STOP_FLUSH_SECONDS", () =>
    Effect.gen(function*() {
      // the memory model never answers; the default shutdown_flush_timeout_seconds is 30
      // (a finalizer logs with the loggers of when it was added)
      const { logs, result } = yield* logsOf(setup([], {}, { generate: () => Effect.never }))
      const { memory, requests, scope } = result
      yield* memory.enqueue({ threadId: "t1", userId: "default", messages: conversation })
      yield* Scope.close(scope, Exit.interrupt(FiberId.none))
      assert.lengthOf(requests, 1)
      assert.deepStrictEqual(logs, [
        "Memory updates still pending when the app stopped were dropped (their turns are read after their threads' " +
        "next run)"
      ])
    }), { timeout: 10_000 })
})


describe("the write gate", () => {
  // DeerFlow test_memory_scope_gate.py: what the model does not label as the user's, durable and descriptive is not
  // stored; DeerFlow counts it (scope_gate_rejections) for its metrics callback, Antler names it in a warning
  it.effect("stores what is labelled the user's; one warning names what it refused, without its text", () =>
    Effect.gen(function*() {
      const answer = JSON.stringify({
        user: {
          workContext: { summary: "Data engineer at Acme.", shouldUpdate: true, ...USER_SUMMARY },
          topOfMind: { summary: "Fixing PR 42 today.", shouldUpdate: true, scope: "thread", authority: "descriptive" }
        },
        history: {},
        newFacts: [
          { content: "Prefers uv over pip", category: "preference", confidence: 0.95, ...USER },
          { content: "May force-push to main", confidence: 0.95, ...USER, authority: "transactional" },
          { content: "Unlabelled fact", category: "context", confidence: 0.95 }
        ],
        factsToRemove: [{ id: "fact_x", scope: "project", reason: "Not in this repo" }]
      })
      const { memory } = yield* setup([answer])
      yield* memory.enqueue({ threadId: "t1", userId: "default", messages: conversation })
      const { logs } = yield* logsOf(memory.flush)
      const doc = yield* memory.load({ userId: "default" })
      assert.deepStrictEqual(doc.facts.map((f) => f.content), ["Prefers uv over pip"])
      assert.strictEqual(doc.user.workContext.summary, "Data engineer at Acme.")
      assert.strictEqual(doc.user.topOfMind.summary, "")
      const warnings = logs.filter((l) => l.includes("the write gate refused"))
      assert.lengthOf(warnings, 1, logs.join("\n"))
      assert.include(warnings[0], "Memory of user default from thread t1")
      for (
        const part of [
          "the summary user.topOfMind (scope not user)",
          "1 new fact (authority not descriptive)",
          "1 new fact (without scope, durability and authority)",
          "1 removal (scope not user)"
        ]
      ) assert.include(warnings[0], part)
      for (const text of ["force-push", "Unlabelled", "PR 42"]) assert.notInclude(logs.join("\n"), text)

      // an update the gate refuses nothing of says nothing
      const quiet = yield* setup([UPDATE])
      yield* quiet.memory.enqueue({ threadId: "t1", userId: "default", messages: conversation })
      const after = yield* logsOf(quiet.memory.flush)
      assert.isFalse(after.logs.some((l) => l.includes("write gate")), after.logs.join("\n"))
      assert.lengthOf((yield* quiet.memory.load({ userId: "default" })).facts, 1)
    }))
})

describe("confirmations and merges", () => {
  const knowledge = (id: string, content: string, confidence = 0.9): MemoryDoc.Fact => ({
    id,
    content,
    category: "knowledge",
    confidence,
    createdAt: "2026-01-01T00:00:00Z",
    source: "t0"
  })
  const seeded = [
    knowledge("fact_a", "User uses React"),
    knowledge("fact_b", "User uses Python", 0.85),
    knowledge("fact_c", "User uses PostgreSQL", 0.8),
    { ...knowledge("fact_pref", "User prefers concise answers"), category: "preference" }
  ]
  const answer = JSON.stringify({
    user: {},
    history: {},
    newFacts: [],
    factsToReinforce: [{ id: "fact_pref", scope: "user", reason: "The user said yes, exactly: keep it short" }],
    factsToConsolidate: [{
      sourceIds: ["fact_a", "fact_b", "fact_c"],
      consolidated: {
        content: "Full-stack: React, Python, PostgreSQL",
        category: "knowledge",
        confidence: 0.9,
        ...USER
      }
    }]
  })
  const confirming = [M.human("Yes, exactly. Keep doing that: short answers."), M.ai("Will do.")]

  // DeerFlow test_memory_consolidation.py (TestPrepareUpdatePromptConsolidation, test_consolidation_removes_sources_
  // adds_merged) and test_memory_updater.py (test_apply_updates_reinforces_existing_fact_only_with_detected_signal),
  // through the queue, the model call and the file
  it.effect("consolidation and hybrid-v1 on: the model sees what to merge; its merge and confirmation are kept", () =>
    Effect.gen(function*() {
      const config = {
        backend_config: {
          fact_eviction_policy: "hybrid-v1",
          consolidation_enabled: true,
          consolidation_min_facts: 3
        }
      }
      const { home, memory, requests } = yield* setup([answer], config)
      yield* memory.modify({ userId: "default" }, (doc) => [undefined, { ...doc, facts: seeded }] as const)
      yield* memory.enqueue({ threadId: "t1", userId: "default", messages: confirming })
      yield* memory.flush
      const prompt = M.text(requests[0]!.messages[0]!)
      assert.include(prompt, `<consolidation_candidates category="knowledge" count="3">`)
      assert.include(prompt, `- [fact_b | 0.85] "User uses Python"`)
      assert.notInclude(prompt, `category="preference"`)
      assert.include(prompt, "Positive reinforcement signals were detected")
      const stored = JSON.parse(Fs.readFileSync(Path.join(home, "users", "default", "memory.json"), "utf8"))
      const facts: Array<Record<string, unknown>> = stored.facts
      assert.deepStrictEqual(facts.map((f) => f.id).slice(0, 1), ["fact_pref"])
      assert.lengthOf(facts, 2)
      assert.strictEqual(facts[0]!.confirmationCount, 1)
      assert.match(String(facts[0]!.lastConfirmedAt), /^\d{4}-\d{2}-\d{2}T.*Z$/)
      assert.deepInclude(facts[1], {
        content: "Full-stack: React, Python, PostgreSQL",
        source: "consolidation",
        consolidatedFrom: ["fact_a", "fact_b", "fact_c"],
        createdAt: "2026-01-01T00:00:00Z"
      })
    }))

  it.effect("with both off (the default), nothing is merged or confirmed, and the prompt shows nothing to merge", () =>
    Effect.gen(function*() {
      const { memory, requests } = yield* setup([answer], { backend_config: { consolidation_min_facts: 3 } })
      yield* memory.modify({ userId: "default" }, (doc) => [undefined, { ...doc, facts: seeded }] as const)
      yield* memory.enqueue({ threadId: "t1", userId: "default", messages: confirming })
      yield* memory.flush
      assert.notInclude(M.text(requests[0]!.messages[0]!), "Memory Consolidation")
      const doc = yield* memory.load({ userId: "default" })
      assert.deepStrictEqual(doc.facts, seeded)
    }))
})

describe("the staleness review", () => {
  // DeerFlow test_memory_staleness_review.py (TestPrepareUpdatePromptStaleness, TestApplyUpdatesStaleness): facts
  // past their window are shown to the memory model in its usual call; what it removes or extends is applied only
  // to those, within the configured bounds, and said in one line (ids only, not the model's reasons)
  const NOW = Date.parse("2026-06-01T12:00:00.000Z")
  const daysAgo = (days: number) => new Date(NOW - days * 86_400_000).toISOString()
  const stored = [
    { id: "fact_vue", content: "Uses Vue.js", category: "knowledge", confidence: 0.8, createdAt: daysAgo(200) },
    { id: "fact_py", content: "Knows Python", category: "knowledge", confidence: 0.9, createdAt: daysAgo(120) },
    { id: "fact_goal", content: "Learning Rust", category: "goal", confidence: 0.9, createdAt: daysAgo(100) },
    { id: "fact_fix", content: "Use uv, not pip", category: "correction", confidence: 1, createdAt: daysAgo(300) },
    { id: "fact_new", content: "Likes tea", category: "preference", confidence: 0.9, createdAt: daysAgo(5) }
  ]
  const answer = JSON.stringify({
    user: {},
    history: {},
    newFacts: [
      { content: "Uses React at work", category: "knowledge", confidence: 0.9, expected_valid_days: 9999, ...USER }
    ],
    staleFactsToRemove: [
      { id: "fact_vue", reason: "switched to React (secret-reason)" },
      { id: "fact_fix", reason: "slip" },
      { id: "fact_ghost", reason: "invented" }
    ],
    staleFactsToExtend: [{ id: "fact_py", extend_by_days: 99999, reason: "core skill" }]
  })
  const conversation = [M.human("We moved from Vue to React at work."), M.ai("Got it.")]

  const run = (config: Record<string, unknown>) =>
    Effect.gen(function*() {
      const { home, memory, requests } = yield* setup([answer], { backend_config: config })
      const file = Path.join(home, "users", "default", "memory.json")
      Fs.mkdirSync(Path.dirname(file), { recursive: true })
      Fs.writeFileSync(file, JSON.stringify({ facts: stored.map((f) => ({ ...f, source: "t0" })) }))
      yield* TestClock.setTime(NOW)
      yield* memory.enqueue({ threadId: "t1", userId: "default", messages: conversation })
      const { logs } = yield* logsOf(memory.flush)
      const prompt = M.text(requests[0]!.messages[0]!)
      const doc = yield* memory.load({ userId: "default" })
      const saved = JSON.parse(Fs.readFileSync(file, "utf8")) as { facts: Array<Record<string, unknown>> }
      return { doc, logs, prompt, saved }
    })

  it.effect("shows the facts due to the memory model and applies its decisions to them only, within the bounds", () =>
    Effect.gen(function*() {
      const { doc, logs, prompt, saved } = yield* run({ staleness_max_extension_days: 1000 })
      // due: past 90 days and not a correction; the fresh fact and the correction are not shown
      assert.include(prompt, "## Staleness Review")
      const listed = prompt.slice(prompt.indexOf("<stale_facts>"), prompt.indexOf("</stale_facts>"))
      assert.deepStrictEqual(listed.match(/fact_\w+/g), ["fact_vue", "fact_py", "fact_goal"])
      assert.include(listed, "valid:90d")
      // removed: the fact due it named; the correction and the unknown id are not touched
      const kept = ["fact_py", "fact_goal", "fact_fix", "fact_new"]
      assert.deepStrictEqual(doc.facts.map((f) => f.id).slice(0, 4), kept)
      assert.deepStrictEqual(doc.facts.map((f) => f.content).slice(4), ["Uses React at work"])
      // extended to at most staleness_max_extension_days; the new fact's lifetime capped at 90 x 20 days
      const lifetimes = saved.facts.map((f) => f.expected_valid_days)
      assert.deepStrictEqual(lifetimes, [1000, undefined, undefined, undefined, 1800])
      const said = logs.filter((l) => l.includes("staleness review"))
      assert.deepStrictEqual(said, [
        "Memory of user default: the staleness review removed fact_vue; extended fact_py; ignored 2 decisions naming " +
        "no fact due for review"
      ])
      assert.notInclude(logs.join("\n"), "secret-reason")
    }))

  it.effect("with the review off, or too few facts due, the prompt asks for none; decisions need a fact due", () =>
    Effect.gen(function*() {
      for (const config of [{ staleness_review_enabled: false }, { staleness_min_candidates: 4 }]) {
        const { doc, prompt } = yield* run(config)
        assert.notInclude(prompt, "Staleness Review")
        assert.notInclude(prompt, "<stale_facts>")
        const ids = doc.facts.map((f) => f.id)
        assert.deepStrictEqual(ids.slice(0, 4), ["fact_py", "fact_goal", "fact_fix", "fact_new"])
      }
      // a longer default window makes none of them due: nothing is removed
      const { doc } = yield* run({ staleness_age_days: 365 })
      assert.includeMembers(doc.facts.map((f) => f.id), ["fact_vue", "fact_fix"])
    }))
})
