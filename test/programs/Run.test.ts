import { assert, describe, it } from "@effect/vitest"
import * as Chunk from "effect/Chunk"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as FC from "effect/FastCheck"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import * as MemoryThreadStore from "../../src/layers/MemoryThreadStore.js"
import * as ScriptedModel from "../../src/layers/ScriptedModel.js"
import * as Toolkit from "../../src/layers/Toolkit.js"
import * as MW from "../../src/middleware/Middleware.js"
import * as Run from "../../src/programs/Run.js"
import { ModelError } from "../../src/services/ModelService.js"
import * as Tool from "../../src/services/Tool.js"
import { Interrupt } from "../../src/services/ToolService.js"
import { ThreadStore } from "../../src/services/ThreadStore.js"
import type { Message } from "../../src/state/Message.js"
import * as M from "../../src/state/Message.js"
import * as H from "../support/harness.js"

const echo = Tool.make({
  name: "echo",
  description: "Echoes its text.",
  parameters: Schema.Struct({ text: Schema.String.annotations({ description: "What to echo" }) }),
  handler: ({ text }) => Effect.succeed(`echo: ${text}`)
})

const boom = Tool.make({
  name: "boom",
  description: "Always fails.",
  parameters: Schema.Struct({}),
  handler: (_, call) => Effect.fail(Tool.failure(call, new Error("disk on fire")))
})

const crash = Tool.make({
  name: "crash",
  description: "Throws.",
  parameters: Schema.Struct({}),
  handler: () => Effect.sync(() => { throw new TypeError("undefined is not a function") })
})

const results = (messages: ReadonlyArray<Message>) => messages.filter((m) => m.type === "tool").map(M.text)

/** Every tool call (structured or invalid with an id) is answered exactly once, before the next AI message. */
const everyCallAnswered = (messages: ReadonlyArray<Message>): boolean => {
  for (let i = 0; i < messages.length; i++) {
    const m = messages[i]!
    if (m.type !== "ai") continue
    const open = [...M.toolCalls(m).map((c) => c.id), ...M.invalidToolCalls(m).flatMap((c) => (c.id ? [c.id] : []))]
    const answered: Array<string> = []
    for (let j = i + 1; j < messages.length && messages[j]!.type === "tool"; j++) {
      answered.push((messages[j] as M.ToolMessage).tool_call_id)
    }
    if (open.length !== answered.length || open.some((id) => answered.filter((a) => a === id).length !== 1)) return false
  }
  return true
}

describe("the run loop", () => {
  it.effect("a tool call is executed, its result sent back, and the final answer ends the run", () =>
    Effect.gen(function*() {
      const o = yield* H.run({ script: [{ toolCalls: [{ name: "echo", args: { text: "hi" } }] }, "all done"], tools: [echo] })
      assert.deepStrictEqual(o.end, {
        type: "run_end",
        status: "success",
        stop_reason: "completed",
        usage: { total_input_tokens: 0, total_output_tokens: 0, total_tokens: 0 }
      })
      assert.deepStrictEqual(o.state.messages.map((m) => m.type), ["human", "ai", "tool", "ai"])
      assert.deepStrictEqual(results(o.state.messages), ["echo: hi"])
      assert.deepStrictEqual(o.requests[1]!.messages.map((m) => m.type), ["human", "ai", "tool"])
      assert.deepStrictEqual(o.requests[0]!.tools.map((t) => t.name), ["echo"])
      assert.strictEqual(o.events[0]!.type, "run_start")
      assert.strictEqual(o.events[o.events.length - 1]!.type, "run_end")
    }).pipe(H.withStore))

  it.effect("an unknown tool gets an error result naming the tools that exist, and the run goes on", () =>
    Effect.gen(function*() {
      const o = yield* H.run({ script: [{ toolCalls: [{ name: "teleport", args: {} }] }, "ok"], tools: [echo] })
      assert.strictEqual(o.end.stop_reason, "completed")
      const [result] = results(o.state.messages)
      assert.match(result!, /^Error: Tool 'teleport' does not exist\. Available tools: echo\.$/)
      assert.strictEqual((o.state.messages[2] as M.ToolMessage).status, "error")
    }).pipe(H.withStore))

  it.effect("arguments that are not valid JSON get an error result and the run goes on", () =>
    Effect.gen(function*() {
      const broken = M.ai("", {
        id: "ai-broken",
        invalid_tool_calls: [{ id: "call-1", name: "echo", args: "{\"text\": \"hi", error: "Unterminated string" }]
      })
      const o = yield* H.run({ script: [() => broken, "recovered"], tools: [echo] })
      assert.strictEqual(o.end.stop_reason, "completed")
      const tool = o.state.messages[2] as M.ToolMessage
      assert.strictEqual(tool.tool_call_id, "call-1")
      assert.strictEqual(tool.status, "error")
      assert.match(M.text(tool), /not valid JSON \(Unterminated string\)/)
      assert.strictEqual(M.text(o.state.messages[3]!), "recovered")
    }).pipe(H.withStore))

  it.effect("arguments of the wrong shape are refused with the path of each bad field", () =>
    Effect.gen(function*() {
      const o = yield* H.run({ script: [{ toolCalls: [{ name: "echo", args: { text: 42 } }] }, "ok"], tools: [echo] })
      const [result] = results(o.state.messages)
      assert.match(result!, /^Error: Invalid arguments for tool 'echo': text: Expected string, actual 42/)
    }).pipe(H.withStore))

  it.effect("a failing or throwing tool becomes an error result the model can read", () =>
    Effect.gen(function*() {
      const o = yield* H.run({
        script: [{ toolCalls: [{ name: "boom", args: {} }, { name: "crash", args: {} }] }, "ok"],
        tools: [boom, crash]
      })
      assert.strictEqual(o.end.stop_reason, "completed")
      const [failed, thrown] = results(o.state.messages)
      assert.strictEqual(failed, "Error: Tool 'boom' failed with Error: disk on fire")
      assert.match(thrown!, /^Error: Tool 'crash' failed with TypeError: undefined is not a function/)
    }).pipe(H.withStore))

  it.effect("the recursion limit ends a runaway run with a typed stop, every call answered", () =>
    Effect.gen(function*() {
      const o = yield* H.run({
        script: (_, n) => ({ toolCalls: [{ name: "echo", args: { text: `again ${n}` } }] }),
        tools: [echo],
        options: { recursionLimit: 4 }
      })
      assert.strictEqual(o.end.status, "error")
      assert.strictEqual(o.end.stop_reason, "recursion_limit")
      assert.strictEqual(o.end.error?.name, "RecursionLimitReached")
      assert.strictEqual(o.requests.length, 4)
      assert.strictEqual(results(o.state.messages).length, 4)
      assert.isTrue(everyCallAnswered(o.state.messages))
    }).pipe(H.withStore))

  it.live("tool calls of one response run concurrently within the bound, results in call order", () =>
    Effect.gen(function*() {
      let inFlight = 0
      let peak = 0
      const slow = Tool.make({
        name: "slow",
        description: "Takes a while.",
        parameters: Schema.Struct({ ms: Schema.Number }),
        handler: ({ ms }) =>
          Effect.gen(function*() {
            peak = Math.max(peak, ++inFlight)
            yield* Effect.sleep(ms)
            inFlight--
            return `slept ${ms}`
          })
      })
      const calls = [30, 5, 20, 1, 10, 2].map((ms) => ({ name: "slow", args: { ms } }))
      const o = yield* H.run({ script: [{ toolCalls: calls }, "ok"], tools: [slow], options: { toolConcurrency: 2 } })
      assert.strictEqual(peak, 2)
      assert.deepStrictEqual(results(o.state.messages), ["slept 30", "slept 5", "slept 20", "slept 1", "slept 10", "slept 2"])
    }).pipe(H.withStore))

  it.effect("an Interrupt ends the run as interrupted with its payload, after saving; the next run goes on", () =>
    Effect.gen(function*() {
      const ask = Tool.make({
        name: "ask",
        description: "Asks the user.",
        parameters: Schema.Struct({ question: Schema.String }),
        handler: ({ question }, call) =>
          Effect.fail(
            new Interrupt({
              reason: "clarification",
              payload: { question },
              result: { message: M.tool(`? ${question}`, call.id, { name: "ask" }) }
            })
          )
      })
      const first = yield* H.run({
        script: [{ toolCalls: [{ name: "ask", args: { question: "Which file?" } }, { name: "echo", args: { text: "x" } }] }],
        tools: [ask, echo],
        threadId: "asks"
      })
      assert.strictEqual(first.end.status, "interrupted")
      assert.deepStrictEqual(first.end.interrupt, { question: "Which file?" })
      assert.deepStrictEqual(results(first.state.messages), ["? Which file?", "echo: x"])
      const second = yield* H.run({ script: ["Thanks, using notes.md"], threadId: "asks", input: "notes.md" })
      assert.strictEqual(second.end.stop_reason, "completed")
      assert.deepStrictEqual(second.requests[0]!.messages.map((m) => M.text(m)).slice(-2), ["echo: x", "notes.md"])
    }).pipe(H.withStore))

  it.effect("a model failure with no retry layer ends the run with status error; the input is kept", () =>
    Effect.gen(function*() {
      const failing = yield* Run.execute(
        { threadId: "fails-2", input: [M.human("hi")] },
        MW.base(
            { generate: () => Effect.fail(new ModelError({ reason: "server", errorType: "InternalServerError", message: "500 oops" })) },
            Toolkit.make([])
          )
      )
      assert.strictEqual(failing.status, "error")
      assert.deepStrictEqual(failing.error, { name: "ModelError", message: "500 oops" })
      const saved = Option.getOrThrow(yield* (yield* ThreadStore).load("fails-2"))
      assert.deepStrictEqual(saved.state.messages.map(M.text), ["hi"])
      assert.strictEqual(saved.runs[0]!.status, "error")
    }).pipe(H.withStore))

  it.live("cancelling the run saves what completed; unfinished calls get a result saying so", () =>
    Effect.gen(function*() {
      const started = yield* Deferred.make<void>()
      const hang = Tool.make({
        name: "hang",
        description: "Never returns.",
        parameters: Schema.Struct({}),
        handler: () => Deferred.succeed(started, undefined).pipe(Effect.zipRight(Effect.never))
      })
      const store = yield* ThreadStore
      const fiber = yield* Run.execute(
        { threadId: "cancel", input: [M.human("go")] },
        MW.base(
            ScriptedModel.make([
              { toolCalls: [{ name: "echo", args: { text: "step 1" } }] },
              { toolCalls: [{ name: "hang", args: {} }, { name: "echo", args: { text: "fast" } }] }
            ]),
            Toolkit.make([echo, hang])
          )
      ).pipe(Effect.fork)
      yield* Deferred.await(started)
      yield* Effect.sleep("20 millis")
      yield* Fiber.interrupt(fiber)
      const saved = Option.getOrThrow(yield* store.load("cancel")).state.messages
      assert.deepStrictEqual(results(saved), [
        "echo: step 1",
        Run.INTERRUPTED_TOOL_RESULT,
        "echo: fast"
      ])
      assert.isTrue(everyCallAnswered(saved))
      const run = Option.getOrThrow(yield* store.load("cancel")).runs[0]!
      assert.strictEqual(run.status, "cancelled")
    }).pipe(H.withStore))

  it.live("the stream ends with run_end; stopping it early cancels the run and keeps completed steps", () =>
    Effect.gen(function*() {
      const stack = () => MW.base(ScriptedModel.make([{ toolCalls: [{ name: "echo", args: { text: "a" } }] }, "done"]), Toolkit.make([echo]))
      const all = yield* Stream.runCollect(Run.stream({ threadId: "s1", input: [M.human("go")] }, stack()))
      const events = Chunk.toReadonlyArray(all)
      assert.strictEqual(events[events.length - 1]!.type, "run_end")
      assert.strictEqual(events.filter((e) => e.type === "token").length, 1)
      const early = yield* Stream.runCollect(
        Run.stream({ threadId: "s2", input: [M.human("go")] }, stack()).pipe(Stream.take(2))
      )
      assert.strictEqual(Chunk.size(early), 2)
      const saved = yield* (yield* ThreadStore).load("s2")
      assert.isTrue(Option.isSome(saved))
    }).pipe(H.withStore))
})

/** A store that checks the law at every checkpoint. */
/**
 * A store that checks every checkpoint: each tool call has its result, except the calls of a model message
 * saved by this very checkpoint (the message is saved before its tools run, so a crash never runs them twice).
 */
const checkingStore = (violations: Array<string>) =>
  Layer.sync(ThreadStore, () => {
    const inner = MemoryThreadStore.make()
    return ThreadStore.of({
      ...inner,
      append: (threadId, runId, updates, options) =>
        inner.append(threadId, runId, updates, options).pipe(
          Effect.zipRight(inner.load(threadId)),
          Effect.map((loaded) => {
            const messages = Option.getOrThrow(loaded).state.messages
            const last = messages[messages.length - 1]
            const savedNow = last?.type === "ai" &&
              updates.some((u) => u.messages?.some((m) => m.type === "ai" && m.id === last.id))
            const settled = savedNow ? messages.slice(0, -1) : messages
            if (!everyCallAnswered(settled)) violations.push(JSON.stringify(messages.map((m) => m.type)))
          })
        )
    })
  })

const callArb = FC.record({
  name: FC.constantFrom("echo", "boom", "crash", "missing"),
  args: FC.constantFrom({ text: "x" }, {}, { text: 1 })
})
const turnArb = FC.oneof(
  FC.array(callArb, { minLength: 1, maxLength: 3 }).map((calls) => ({ kind: "calls" as const, calls })),
  FC.nat(2).map((n) => ({ kind: "invalid" as const, n: n + 1 }))
)

describe("loop laws", () => {
  it.effect.prop(
    "after every checkpoint, no AI tool call is without its ToolMessage but those of the message it saves",
    [FC.array(turnArb, { minLength: 1, maxLength: 5 })],
    ([turns]) =>
      Effect.gen(function*() {
        const violations: Array<string> = []
        const script = [
          ...turns.map((turn, t) =>
            turn.kind === "calls"
              ? { toolCalls: turn.calls }
              : () =>
                M.ai("", {
                  id: `bad-${t}`,
                  invalid_tool_calls: Array.from({ length: turn.n }, (_, i) => ({
                    id: `bad-${t}-${i}`,
                    name: "echo",
                    args: "{",
                    error: "Unexpected end of JSON input"
                  }))
                })
          ),
          "done"
        ]
        const o = yield* H.run({ script, tools: [echo, boom, crash] }).pipe(Effect.provide(checkingStore(violations)))
        assert.deepStrictEqual(violations, [])
        assert.strictEqual(o.end.stop_reason, "completed")
        assert.isTrue(everyCallAnswered(o.state.messages))
        for (const request of o.requests) assert.isTrue(everyCallAnswered(request.messages))
        assert.strictEqual(o.requests.length, turns.length + 1)
      }),
    { fastCheck: { numRuns: 50 } }
  )
})

