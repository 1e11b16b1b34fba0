import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as FastCheck from "effect/FastCheck"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import * as ScriptedModel from "../../src/layers/ScriptedModel.js"
import * as DurableContext from "../../src/middleware/DurableContext.js"
import * as Summarization from "../../src/middleware/Summarization.js"
import * as Chains from "../../src/programs/Chains.js"
import * as Compaction from "../../src/programs/Compaction.js"
import type { ContextSize, ModelConfig, SummarizationConfig } from "../../src/services/AppConfig.js"
import { AppConfigService, defaults } from "../../src/services/AppConfig.js"
import type { Memory, Pending } from "../../src/services/Memory.js"
import type { ModelRequest } from "../../src/services/ModelService.js"
import type { RunEvent } from "../../src/services/RunEvents.js"
import { ThreadStore } from "../../src/services/ThreadStore.js"
import * as Tool from "../../src/services/Tool.js"
import type { Message } from "../../src/state/Message.js"
import * as M from "../../src/state/Message.js"
import * as Harness from "../support/harness.js"

const flags = { supports_vision: false, supports_thinking: false, supports_reasoning_effort: false }
const models: ReadonlyArray<ModelConfig> = [{ name: "main", model: "gpt-test", ...flags }]
const messages = (value: number): ContextSize => ({ type: "messages", value })

const withConfig = (summarization: Partial<SummarizationConfig>) => <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.provide(
    effect,
    Layer.succeed(AppConfigService, {
      config: { ...defaults(), models, summarization: { ...defaults().summarization, ...summarization } },
      source: undefined,
      home: "/tmp",
      ignored: []
    })
  )

/** A thread: an early skill read, two exchanges with tool calls. Keeping 3 would cut between a4 and t4. */
const history = (): ReadonlyArray<Message> => [
  M.human("Build charts of the Q3 numbers", { id: "u1" }),
  M.ai("", { id: "a1", tool_calls: [{ id: "k1", name: "echo", args: { text: "load q3.csv" } }] }),
  M.tool("echo: load q3.csv", "k1", { id: "t1", name: "echo" }),
  M.ai("Loaded the data; the totals are 10, 20 and 30.", { id: "a2" }),
  M.human("Now make it a bar chart", { id: "u2" }),
  M.ai("", { id: "a4", tool_calls: [{ id: "k4", name: "echo", args: { text: "plot bars" } }] }),
  M.tool("echo: plot bars", "k4", { id: "t4", name: "echo" }),
  M.ai("Saved /mnt/user-data/outputs/q3.png", { id: "a5" })
]

const seed = (threadId: string, seeded: ReadonlyArray<Message>) =>
  Effect.gen(function*() {
    const store = yield* ThreadStore
    yield* store.ensure(threadId)
    yield* store.append(threadId, "seed", [{ messages: seeded }])
  })

const summaryTurn = {
  content: "## Session intent\nQ3 charts. SUMMARY-4411",
  usage: { input_tokens: 200, output_tokens: 10, total_tokens: 210 }
}

const stateOf = (threadId: string) =>
  Effect.flatMap(ThreadStore, (store) =>
    Effect.map(store.load(threadId), (loaded) => loaded._tag === "Some" ? loaded.value.state : undefined))

const customs = (events: ReadonlyArray<RunEvent>, name: string) =>
  events.flatMap((e) => (e.type === "custom" && e.name === name ? [e.data as Record<string, unknown>] : []))

const sink = () => {
  const events: Array<RunEvent> = []
  return { events, service: { emit: (event: RunEvent) => Effect.sync(() => void events.push(event)) } }
}

describe("manual compaction", () => {
  it.effect("forced below the trigger: summarised as the automatic path does, recorded in the thread", () =>
    Effect.gen(function*() {
      yield* seed("t1", history())
      const requests: Array<ModelRequest> = []
      const scripted = ScriptedModel.make([summaryTurn])
      const model = {
        generate: (r: ModelRequest) => Effect.suspend(() => (requests.push(r), scripted.generate(r)))
      }
      const { events, service } = sink()
      const result = yield* Compaction.compactThread("t1", { model, force: true, events: service })

      assert.isTrue(result.compacted)
      assert.strictEqual(requests.length, 1)
      assert.strictEqual(requests[0]!.internal, "summarization")
      assert.deepStrictEqual(requests[0]!.tools, [])
      assert.include(M.text(requests[0]!.messages[0]!), "Human: Build charts of the Q3 numbers")
      const state = (yield* stateOf("t1"))!
      assert.strictEqual(state.summary_text, "## Session intent\nQ3 charts. SUMMARY-4411")
      // keep 3 would split a4 from t4: the cut moves back to a4; the latest user message u2 is rescued
      assert.deepStrictEqual(state.messages.map((m) => m.id), ["u2", "a4", "t4", "a5"])
      assert.strictEqual(result.removed_message_count, 4)
      assert.strictEqual(result.preserved_message_count, 4)
      assert.isTrue(result.summary_updated)
      assert.isAbove(result.total_tokens, 0)
      // one checkpoint of its own, the summary call's tokens recorded under its purpose
      const checkpoints = yield* Effect.flatMap(ThreadStore, (s) => s.checkpoints("t1"))
      assert.strictEqual(result.checkpoint_id, String(checkpoints[checkpoints.length - 1]!.seq))
      assert.strictEqual(state.token_usage?.by_purpose?.summarization?.total_tokens, 210)
      // the same event as the automatic path
      const [event] = customs(events, "summarization")
      assert.strictEqual(event!.status, "completed")
      assert.deepStrictEqual(event!.trigger, { type: "manual", forced: true })
      assert.strictEqual(event!.summarized_messages, 4)
      assert.strictEqual(event!.rescued_messages, 1)
      assert.strictEqual(event!.kept_messages, 3)
      assert.isAbove(event!.tokens_before as number, event!.tokens_after as number)
    }).pipe(withConfig({ enabled: true, trigger: [messages(50)], keep: messages(3) }), Harness.withStore))

  it.effect("with run_events.track_token_usage off, the summary call is booked nowhere, as a run's calls", () =>
    Effect.gen(function*() {
      yield* seed("t-untracked", history())
      const result = yield* Compaction.compactThread("t-untracked", { model: ScriptedModel.make([summaryTurn]) })
      assert.isTrue(result.compacted)
      const state = (yield* stateOf("t-untracked"))!
      assert.strictEqual(state.summary_text, summaryTurn.content)
      // (the thread's token usage, which GET .../token-usage sums, holds nothing of it)
      assert.isUndefined(state.token_usage?.by_purpose?.summarization)
      const checkpoints = yield* Effect.flatMap(ThreadStore, (s) => s.checkpoints("t-untracked"))
      assert.deepStrictEqual(checkpoints.flatMap((c) => c.updates.flatMap((u) => u.token_usage ?? [])), [])
    }).pipe(
      Effect.provide(Layer.succeed(AppConfigService, {
        config: {
          ...defaults(),
          models,
          run_events: { track_token_usage: false },
          summarization: { ...defaults().summarization, enabled: true, trigger: [messages(50)], keep: messages(3) }
        },
        source: undefined,
        home: "/tmp",
        ignored: []
      })),
      Harness.withStore
    ))

  it.effect("unforced below the trigger, or nothing to summarise: a typed error, or `compacted: false`", () =>
    Effect.gen(function*() {
      yield* seed("t2", history())
      yield* seed("t3", [M.human("only one", { id: "x" })])
      const model = ScriptedModel.make([])
      const below = yield* Effect.flip(Compaction.compactThread("t2", { model, force: false }))
      assert.strictEqual(below._tag, "CompactionError")
      assert.strictEqual((below as Compaction.CompactionError).reason, "below_trigger")
      const answered = yield* Compaction.compactThread("t2", { model, force: false, raise: false })
      assert.isFalse(answered.compacted)
      assert.strictEqual(answered.reason, "below_trigger")
      const nothing = yield* Effect.flip(Compaction.compactThread("t3", { model }))
      assert.strictEqual((nothing as Compaction.CompactionError).reason, "not_enough_messages")
      // the thread is unchanged, and no model was asked
      assert.deepStrictEqual((yield* stateOf("t2"))!.messages.map((m) => m.id), history().map((m) => m.id))
      assert.isNull((yield* stateOf("t2"))!.summary_text)
    }).pipe(withConfig({ enabled: true, trigger: [messages(50)], keep: messages(3) }), Harness.withStore))

  it.effect("a summary that cannot be made: summary_failed, the thread unchanged, no hook fired", () =>
    Effect.gen(function*() {
      yield* seed("t4", history())
      const fired: Array<string> = []
      const hooks = [(_: Summarization.SummarizationEvent) => Effect.sync(() => void fired.push("hook"))]
      const { events, service } = sink()
      const failed = yield* Effect.flip(
        Compaction.compactThread("t4", { model: ScriptedModel.make(["  "]), hooks, events: service })
      )
      assert.strictEqual((failed as Compaction.CompactionError).reason, "summary_failed")
      assert.deepStrictEqual((failed as Compaction.CompactionError).errors, ["main: empty summary"])
      const answered = yield* Compaction.compactThread("t4", { model: ScriptedModel.make([]), hooks, raise: false })
      assert.strictEqual(answered.reason, "summary_failed")
      assert.deepStrictEqual(fired, [])
      assert.deepStrictEqual((yield* stateOf("t4"))!.messages.map((m) => m.id), history().map((m) => m.id))
      assert.strictEqual(customs(events, "summarization")[0]!.status, "failed")
    }).pipe(withConfig({ enabled: true, trigger: [messages(50)], keep: messages(3) }), Harness.withStore))

  it.effect("summarization disabled: compaction is off (DeerFlow's 'disabled'); an unknown thread; a busy thread", () =>
    Effect.gen(function*() {
      yield* seed("t5", history())
      const model = ScriptedModel.make([summaryTurn])
      const off = yield* Effect.flip(Compaction.compactThread("t5", { model }).pipe(withConfig({ enabled: false })))
      assert.strictEqual((off as Compaction.CompactionError).reason, "disabled")
      const on = withConfig({ enabled: true, trigger: null, keep: messages(3) })
      const missing = yield* Effect.flip(Compaction.compactThread("nope", { model }).pipe(on))
      assert.strictEqual(missing._tag, "CompactionThreadNotFound")
      const store = yield* ThreadStore
      yield* store.acquireLease({ threadId: "t5", runId: "a-run", ttlMs: 60_000, now: Date.now() })
      const busy = yield* Effect.flip(Compaction.compactThread("t5", { model }).pipe(on))
      assert.strictEqual(busy._tag, "CompactionThreadBusy")
      yield* store.releaseLease("t5", "a-run")
      // no automatic trigger (`trigger: null`), yet the manual compaction works
      const done = yield* Compaction.compactThread("t5", { model }).pipe(on)
      assert.isTrue(done.compacted)
    }).pipe(Harness.withStore))
})

const echo = Tool.make({
  name: "echo",
  description: "Echo",
  parameters: Schema.Struct({ text: Schema.String }),
  handler: ({ text }) => Effect.succeed(`echo: ${text}`)
})

describe("before-summarisation hooks", () => {
  it.effect.prop(
    "run in registration order, each once, a failing one not stopping the next; none when the summary fails",
    [
      FastCheck.array(FastCheck.constantFrom("ok", "fails", "dies"), { maxLength: 6 }),
      FastCheck.boolean(),
      FastCheck.boolean()
    ],
    ([kinds, summaryWorks, manual]) =>
      Effect.gen(function*() {
        const fired: Array<number> = []
        const seen: Array<Summarization.SummarizationEvent> = []
        const hooks = kinds.map((kind, i) => (event: Summarization.SummarizationEvent) =>
          Effect.suspend(() => {
            fired.push(i)
            seen.push(event)
            return kind === "ok" ? Effect.void : kind === "fails" ? Effect.fail("no") : Effect.die(new Error("boom"))
          })
        )
        const summary = summaryWorks ? "SUMMARY" : ""
        yield* seed("h", history())
        if (manual) {
          const result = yield* Compaction.compactThread("h", {
            model: ScriptedModel.make([summary, summary]),
            hooks,
            raise: false
          })
          assert.strictEqual(result.compacted, summaryWorks)
        } else {
          // the automatic path: a trigger fires on the run's first request
          const script = (request: ModelRequest) => request.internal === "summarization" ? summary : "done"
          const middlewares = () => [
            DurableContext.layer(),
            Summarization.layer({ config: { enabled: true, trigger: [messages(5)], keep: messages(3) }, hooks })
          ]
          const out = yield* Harness.run({ threadId: "h", script, tools: [echo], middlewares, input: "go on" })
          assert.strictEqual(out.end.status, "success")
          assert.strictEqual(out.state.summary_text === "SUMMARY", summaryWorks)
        }
        assert.deepStrictEqual(fired, summaryWorks ? kinds.map((_, i) => i) : [])
        for (const event of seen) {
          assert.strictEqual(event.threadId, "h")
          assert.strictEqual(event.manual, manual)
          assert.include(event.summarized.map((m) => m.id), "a1")
          assert.include(event.preserved.map((m) => m.id), "a5")
        }
      }).pipe(withConfig({ enabled: true, trigger: [messages(50)], keep: messages(3) }), Harness.withStore),
    { fastCheck: { numRuns: 40 } }
  )
})


describe("the lead chain's hooks", () => {
  it.effect("memory's flush runs first with the summarised messages, then the app's hooks in the order given", () =>
    Effect.gen(function*() {
      const order: Array<string> = []
      const memory = {
        enabled: true,
        mode: "middleware",
        enqueue: (pending: Pending) =>
          Effect.sync(() => void order.push(`memory:${pending.immediate}:${pending.messages.map((m) => m.id)}`))
      } as unknown as Memory["Type"]
      const app = (name: string) => (event: Summarization.SummarizationEvent) =>
        Effect.sync(() => void order.push(`${name}:${event.summarized.map((m) => m.id)}`))
      const config = {
        ...defaults(),
        models,
        summarization: { ...defaults().summarization, enabled: true, trigger: [messages(5)], keep: messages(3) }
      }
      const entries = Chains.chain({ config, memory, summarizationHooks: [app("first"), app("second")] })
      const summarization = entries.find((e) => e.name === "Summarization")!
      yield* seed("chain", history())
      const script = (request: ModelRequest) => request.internal === "summarization" ? "SUMMARY" : "done"
      const middlewares = () => [DurableContext.layer(), summarization.make()]
      const out = yield* Harness.run({ threadId: "chain", script, tools: [echo], middlewares, input: "go on" })
      assert.strictEqual(out.state.summary_text, "SUMMARY")
      const gone = "u1,a1,t1,a2,u2"
      assert.deepStrictEqual(order, [`memory:true:${gone}`, `first:${gone}`, `second:${gone}`])
    }).pipe(withConfig({ enabled: true, trigger: [messages(5)], keep: messages(3) }), Harness.withStore))
})
