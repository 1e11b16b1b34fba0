import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Context from "effect/Context"
import * as FastCheck from "effect/FastCheck"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as MemoryThreadStore from "../../src/layers/MemoryThreadStore.js"
import * as OpenAiModel from "../../src/layers/OpenAiModel.js"
import * as ScriptedChatServer from "../../src/layers/ScriptedChatServer.js"
import * as Toolkit from "../../src/layers/Toolkit.js"
import * as MW from "../../src/middleware/Middleware.js"
import * as D from "../../src/middleware/DanglingToolCall.js"
import * as Run from "../../src/programs/Run.js"
import type { ModelRequest } from "../../src/services/ModelService.js"
import { ModelService } from "../../src/services/ModelService.js"
import { ThreadStore } from "../../src/services/ThreadStore.js"
import type { AIMessage, InvalidToolCall, Message, ToolCall, ToolMessage } from "../../src/state/Message.js"
import * as M from "../../src/state/Message.js"
import * as H from "../support/harness.js"
import { insideRun } from "../support/fixtures.js"

const request = (messages: ReadonlyArray<Message>): ModelRequest => ({
  systemPrompt: undefined,
  messages,
  tools: [],
  settings: {}
})

const call = (id: string, name = "bash"): ToolCall => ({ id, name, args: {}, type: "tool_call" })
const aiCalls = (id: string, calls: ReadonlyArray<ToolCall>, invalid?: ReadonlyArray<InvalidToolCall>) =>
  M.ai("", { id, tool_calls: calls, ...(invalid !== undefined ? { invalid_tool_calls: invalid } : {}) })
const result = (callId: string, name = "bash", text = `result of ${callId}`) =>
  M.tool(text, callId, { id: `r-${callId}-${text.length}`, name })

const shape = (messages: ReadonlyArray<Message>) =>
  messages.map((m) => m.type === "tool" ? `tool:${m.tool_call_id}` : `${m.type}:${m.id}`)

const patched = (messages: ReadonlyArray<Message>) => D.patchRequest(request(messages)).messages

describe("DanglingToolCall patching", () => {
  it("returns the same request for a well-formed history", () => {
    const req = request([
      M.human("hi", { id: "h1" }),
      aiCalls("a1", [call("c1"), call("c2", "read_file")]),
      result("c1"),
      result("c2", "read_file"),
      M.ai("done", { id: "a2" })
    ])
    assert.strictEqual(D.patchRequest(req), req)
  })

  it("answers a call that has no result right after its AI message", () => {
    const out = patched([M.human("q", { id: "h1" }), aiCalls("a1", [call("c1")]), M.human("again", { id: "h2" })])
    assert.deepStrictEqual(shape(out), ["human:h1", "ai:a1", "tool:c1", "human:h2"])
    const synthetic = out[2] as ToolMessage
    assert.strictEqual(synthetic.status, "error")
    assert.strictEqual(synthetic.name, "bash")
    assert.include(M.text(synthetic), "interrupted")
  })

  it("drops orphan results, keeps the first of duplicated results, and restores call order", () => {
    const first = result("c1", "bash", "first")
    const out = patched([
      aiCalls("a1", [call("c1"), call("c2")]),
      result("orphan"),
      result("c2"),
      M.human("interjection", { id: "h1" }),
      first,
      result("c1", "bash", "second")
    ])
    assert.deepStrictEqual(shape(out), ["ai:a1", "tool:c1", "tool:c2", "human:h1"])
    assert.strictEqual(out[1], first)
  })

  it("gives a blank call id a synthetic id and re-points its only result", () => {
    const answer = M.tool("ran", "", { id: "r1", name: "bash" })
    const out = patched([M.human("q"), aiCalls("a1", [call("")]), answer])
    const id = "deerflow_synthetic_tool_call_1_call_0"
    assert.strictEqual((out[1] as AIMessage).tool_calls![0]!.id, id)
    assert.deepStrictEqual({ ...out[2] }, { ...answer, tool_call_id: id })
  })

  it("pairs blank-id results by name, and by position only when every blank call has a result", () => {
    const named = patched([
      aiCalls("a0", [call("", "bash"), call("", "read_file")]),
      M.tool("file text", "", { id: "r1", name: "read_file" })
    ])
    // One result, two open calls: the name decides.
    assert.deepStrictEqual(shape(named), [
      "ai:a0",
      "tool:deerflow_synthetic_tool_call_0_call_0",
      "tool:deerflow_synthetic_tool_call_0_call_1"
    ])
    assert.strictEqual(M.text(named[2]!), "file text")
    assert.include(M.text(named[1]!), "interrupted")

    const both = patched([aiCalls("a0", [call(""), call("")]), M.tool("one", "", { name: "bash" }), M.tool("two", "")])
    assert.deepStrictEqual([M.text(both[1]!), M.text(both[2]!)], ["one", "two"])

    // Two identical calls and one result: which call it answers cannot be known, so it is not guessed.
    const unsure = patched([aiCalls("a0", [call(""), call("")]), M.tool("one", "", { name: "bash" })])
    assert.deepStrictEqual(shape(unsure).length, 3)
    assert.isTrue(unsure.slice(1).every((m) => M.text(m).includes("interrupted")))
  })

  it("explains invalid calls, with write_file guidance, and normalises their arguments", () => {
    const out = patched([
      aiCalls("a1", [], [
        { id: "i1", name: "write_file", args: "{\"content\": \"unterminated", error: "Unterminated string" },
        { id: "i2", name: "grep", args: "{\"pattern\": \"x\"}", error: null },
        { id: null, name: "", args: "[1,2]", error: "x".repeat(900) }
      ])
    ])
    const ai = out[0] as AIMessage
    assert.deepStrictEqual(ai.invalid_tool_calls!.map((c) => [c.id, c.name, c.args]), [
      ["i1", "write_file", "{}"],
      ["i2", "grep", "{\"pattern\": \"x\"}"],
      ["deerflow_synthetic_tool_call_0_invalid_2", "unknown_tool", "{}"]
    ])
    const [writeFile, grep, nameless] = out.slice(1).map((m) => M.text(m))
    // DeerFlow's test_dangling_tool_call_middleware matches on these words
    for (const words of [
      "write_file failed before execution",
      "no file was written",
      "very large Markdown file in a single tool call",
      "Do not retry the same large `write_file` payload",
      "split the file into smaller sections",
      "normal assistant text",
      "Parser error: Unterminated string"
    ]) assert.include(writeFile!, words)
    assert.notInclude(writeFile!, "{\"content\"", "the broken arguments are not echoed back")
    assert.strictEqual(grep, "[Tool call could not be executed because its arguments were invalid.]")
    assert.include(nameless!, "name was missing or empty")
    assert.notInclude(nameless!, "arguments were invalid")
    assert.strictEqual((out[3] as ToolMessage).name, "unknown_tool")
  })

  it("parses calls kept only in the raw provider payload into calls, and answers them; junk entries are skipped", () => {
    const raw = M.ai("", {
      id: "a1",
      additional_kwargs: {
        reasoning_content: "thinking",
        tool_calls: [
          { id: "", type: "function", function: { name: " ls ", arguments: "not json" } },
          "junk",
          { id: "call_r", type: "function", function: { name: "read_file", arguments: "{\"path\":\"a\"}" } }
        ]
      }
    })
    const out = patched([raw, M.tool("text of a", "call_r", { id: "r1" })])
    const ai = out[0] as AIMessage
    assert.deepStrictEqual(ai.additional_kwargs, { reasoning_content: "thinking" })
    assert.deepStrictEqual(ai.tool_calls, [{ id: "call_r", name: "read_file", args: { path: "a" }, type: "tool_call" }])
    assert.strictEqual(ai.invalid_tool_calls!.length, 1)
    assert.deepInclude(ai.invalid_tool_calls![0]!, { id: "deerflow_synthetic_tool_call_0_raw_0", name: "ls", args: "{}" })
    assert.deepStrictEqual(shape(out), ["ai:a1", "tool:call_r", "tool:deerflow_synthetic_tool_call_0_raw_0"])
    assert.include(M.text(out[2]!), "arguments were invalid")
    assert.strictEqual(D.patchRequest(request(out)).messages, out, "a patched history is well-formed")
    assert.lengthOf(raw.additional_kwargs!.tool_calls as Array<unknown>, 3, "the input is not changed")

    const shadowed = patched([
      M.ai("", { id: "a2", tool_calls: [call("c1", "  ")], additional_kwargs: { tool_calls: [{ id: "x" }] } }),
      M.tool("ok", "c1", { id: "r" })
    ])
    assert.deepStrictEqual(shape(shadowed), ["ai:a2", "tool:c1"])
    assert.strictEqual((shadowed[0] as AIMessage).tool_calls![0]!.name, "unknown_tool")
    assert.strictEqual((shadowed[1] as ToolMessage).name, "unknown_tool")
  })
})

// ---------------------------------------------------------------------------------------------------------
// Properties

type IdKind = "valid" | "empty" | "space"
const idKind = FastCheck.constantFrom<IdKind>("valid", "valid", "valid", "empty", "space")
const name = FastCheck.constantFrom("bash", "read_file", "write_file", "", "  ", " ls ")
const fate = FastCheck.constantFrom("missing", "one", "one", "one", "twice", "blank-id")

const structuredSpec = FastCheck.record({ id: idKind, name, fate })
const invalidSpec = FastCheck.record({
  id: FastCheck.constantFrom<IdKind | "null">("valid", "valid", "null", "empty"),
  name: FastCheck.constantFrom<string | null>("write_file", "grep", null, ""),
  args: FastCheck.constantFrom<string | null>("{bad", "{\"a\":1}", "[1]", null),
  error: FastCheck.constantFrom<string | null>("Expecting value", null),
  fate
})
const rawSpec = FastCheck.record({ id: idKind, name, args: FastCheck.constantFrom("{}", "oops", "{\"q\":2}"), fate })

const turnSpec = FastCheck.record({
  human: FastCheck.boolean(),
  calls: FastCheck.array(structuredSpec, { maxLength: 3 }),
  invalid: FastCheck.array(invalidSpec, { maxLength: 2 }),
  raw: FastCheck.array(rawSpec, { maxLength: 2 }),
  orphans: FastCheck.nat({ max: 2 })
})

const historySpec = FastCheck.record({
  turns: FastCheck.array(turnSpec, { maxLength: 6 }),
  moves: FastCheck.array(FastCheck.tuple(FastCheck.nat(), FastCheck.nat()), { maxLength: 4 })
})

/** Builds a history from a spec: results in place, then some tool messages moved elsewhere (out of order). */
const buildHistory = (spec: typeof historySpec extends FastCheck.Arbitrary<infer T> ? T : never): Array<Message> => {
  let n = 0
  const idOf = (kind: IdKind | "null"): string | null =>
    kind === "valid" ? `call_${++n}` : kind === "empty" ? "" : kind === "space" ? "  " : null
  const messages: Array<Message> = []
  spec.turns.forEach((turn, t) => {
    if (turn.human) messages.push(M.human(`q${t}`, { id: `h${t}` }))
    const results: Array<Message> = []
    const answer = (id: string | null, callName: string | null, fate: string) => {
      const resultId = fate === "blank-id" || id === null ? "" : id
      if (fate === "missing") return
      results.push(M.tool(`out ${++n}`, resultId, { id: `r${n}`, ...(callName !== null ? { name: callName } : {}) }))
      if (fate === "twice") results.push(M.tool(`dup ${++n}`, resultId, { id: `r${n}` }))
    }
    const structured = turn.calls.map((c) => {
      const id = idOf(c.id)!
      answer(id, c.name, c.fate)
      return { id, name: c.name, args: {}, type: "tool_call" as const }
    })
    const invalid = turn.invalid.map((c) => {
      const id = idOf(c.id)
      answer(id, c.name, c.fate)
      return { id, name: c.name, args: c.args, error: c.error, type: "invalid_tool_call" as const }
    })
    const useRaw = structured.length === 0 && invalid.length === 0
    const raw = turn.raw.map((c) => {
      const id = idOf(c.id)!
      if (useRaw) answer(id, c.name, c.fate)
      return { id, type: "function", function: { name: c.name, arguments: c.args } }
    })
    messages.push(M.ai(`a${t}`, {
      id: `a${t}`,
      ...(structured.length > 0 ? { tool_calls: structured } : {}),
      ...(invalid.length > 0 ? { invalid_tool_calls: invalid } : {}),
      ...(raw.length > 0 ? { additional_kwargs: { tool_calls: raw } } : {})
    }))
    messages.push(...results)
    for (let o = 0; o < turn.orphans; o++) messages.push(M.tool("lost", `orphan_${++n}`, { id: `o${n}` }))
  })
  for (const [from, to] of spec.moves) {
    const tools = messages.flatMap((m, i) => m.type === "tool" ? [i] : [])
    if (tools.length === 0) break
    const [moved] = messages.splice(tools[from % tools.length]!, 1)
    messages.splice(to % (messages.length + 1), 0, moved!)
  }
  return messages
}

/** The calls of an AI message as the model serializer sends them to the provider. */
const callIds = (message: AIMessage): Array<unknown> => {
  const wire = OpenAiModel.toChatMessage(message) as { tool_calls?: ReadonlyArray<{ id: string }> }
  return (wire.tool_calls ?? []).map((c) => c.id)
}

const isBlank = (value: unknown) => typeof value !== "string" || value.trim() === ""

/** The laws of a patched history. */
const assertWellFormed = (input: ReadonlyArray<Message>, output: ReadonlyArray<Message>) => {
  for (let i = 0; i < output.length;) {
    const message = output[i]!
    assert.notStrictEqual(message.type, "tool", `tool message at ${i} does not follow its AI message`)
    if (message.type !== "ai") {
      i++
      continue
    }
    const ids = callIds(message)
    for (let j = 0; j < ids.length; j++) {
      const answer = output[i + 1 + j]
      assert.isFalse(isBlank(ids[j]), "every call has an id")
      assert.strictEqual(answer?.type, "tool", `call ${String(ids[j])} is answered right after its AI message`)
      assert.strictEqual((answer as ToolMessage).tool_call_id, ids[j])
      // A real result is kept (the first one for the id), never replaced by a synthetic one.
      const real = input.find((m): m is ToolMessage => m.type === "tool" && m.tool_call_id === ids[j])
      if (real !== undefined) assert.strictEqual(answer!.id, real.id)
    }
    for (const c of message.tool_calls ?? []) assert.isFalse(isBlank(c.name))
    for (const c of message.invalid_tool_calls ?? []) {
      assert.isFalse(isBlank(c.name))
      assert.isTrue(typeof JSON.parse(c.args!) === "object")
    }
    i += 1 + ids.length
  }
  // Every call answered exactly once: no id answered twice.
  const answered = output.flatMap((m) => m.type === "tool" ? [m.tool_call_id] : [])
  assert.strictEqual(new Set(answered).size, answered.length)
  // Nothing but tool messages moves or disappears.
  assert.deepStrictEqual(
    output.filter((m) => m.type !== "tool").map((m) => m.id),
    input.filter((m) => m.type !== "tool").map((m) => m.id)
  )
}

const wellFormedSpec = FastCheck.array(
  FastCheck.record({ human: FastCheck.boolean(), calls: FastCheck.nat({ max: 4 }) }),
  { maxLength: 12 }
)

describe("DanglingToolCall laws", () => {
  it.prop(
    "any history: every call answered once, right after its AI message, no orphan, idempotent",
    [historySpec],
    ([spec]) => {
      const input = buildHistory(spec)
      const req = request(input)
      const out = D.patchRequest(req)
      assertWellFormed(input, out.messages)
      const again = D.patchRequest(out)
      assert.strictEqual(again, out, "patching a patched history changes nothing")
      assert.deepStrictEqual(input, buildHistory(spec), "the input is not mutated")
    },
    { fastCheck: { numRuns: 500 } }
  )

  it.prop("a well-formed history passes through as the same object", [wellFormedSpec], ([turns]) => {
    let n = 0
    const messages: Array<Message> = []
    turns.forEach((turn, t) => {
      if (turn.human) messages.push(M.human(`q${t}`))
      const calls = Array.from({ length: turn.calls }, () => call(`call_${++n}`, n % 2 === 0 ? "bash" : "read_file"))
      messages.push(M.ai(`a${t}`, calls.length > 0 ? { tool_calls: calls } : {}))
      for (const c of calls) messages.push(result(c.id, c.name))
    })
    const req = request(messages)
    assert.isTrue(D.isWellFormed(messages))
    assert.strictEqual(D.patchRequest(req), req)
  })
})

/** The layer's model wrap over a model that returns the request it got. */
const throughLayer = Effect.gen(function*() {
  const seen: Array<ModelRequest> = []
  const model = {
    generate: (req: ModelRequest) => Effect.sync(() => (seen.push(req), { message: M.ai("ok") }))
  }
  const ports = yield* Layer.build(MW.stack([D.layer()], MW.base(model, Toolkit.make([]))))
  const generate = Context.get(ports, ModelService).generate
  const call = (req: ModelRequest) => Effect.map(generate(req), () => seen[seen.length - 1]!)
  return { call, inside: <A, E, R>(body: Effect.Effect<A, E, R>) => insideRun(ports, body) }
})

describe("DanglingToolCall laws", () => {
  it.effect.prop(
    "within a run, a growing (or rewritten) history is patched exactly as from scratch",
    [historySpec, FastCheck.array(FastCheck.nat(), { minLength: 1, maxLength: 6 }), FastCheck.nat()],
    ([spec, cuts, rewrite]) =>
      Effect.scoped(Effect.gen(function*() {
        const full = buildHistory(spec)
        const { call, inside } = yield* throughLayer
        const ends = [...cuts.map((c) => c % (full.length + 1)), full.length].sort((a, b) => a - b)
        yield* inside(Effect.gen(function*() {
        for (const end of ends) {
          const history = full.slice(0, end)
          if (end > 0 && rewrite % 3 === 0) {
            // An in-place rewrite by id (a hard stop stripping the last AI message's calls, say).
            const at = rewrite % end
            const old = history[at]!
            history[at] = old.type === "ai" ? { ...old, tool_calls: [] } : { ...old }
          }
          const req = request(history)
          const seen = yield* call(req)
          const expected = D.patchRequest(req)
          assert.deepStrictEqual(seen.messages, expected.messages)
          if (expected === req) assert.strictEqual(seen, req)
        }
        }))
      })),
    { fastCheck: { numRuns: 150 } }
  )
})

describe("DanglingToolCall within a run (found by the law above, seed -1718565447)", () => {
  it.effect("a result that came before its call is the one the call gets, also when the call comes later", () =>
    Effect.scoped(Effect.gen(function*() {
      const early = { ...result("call_1", "bash", "the first output"), id: "r-early" }
      const late = { ...result("call_1", "bash", "a duplicate"), id: "r-late" }
      const first: Array<Message> = [early, M.ai("thinking", { id: "a0" }), M.human("go", { id: "h1" })]
      const full: Array<Message> = [...first, aiCalls("a1", [call("call_1")]), late]
      const { call: send, inside } = yield* throughLayer
      const seen = yield* inside(Effect.gen(function*() {
        yield* send(request(first))
        return yield* send(request(full))
      }))
      const results = seen.messages.filter((m) => m.type === "tool")
      assert.deepStrictEqual(results.map((m) => m.id), ["r-early"])
      assert.deepStrictEqual(seen.messages, D.patchRequest(request(full)).messages)
    })))
})

describe("DanglingToolCall middleware", () => {
  it.effect("the model sees the dangling call answered; the saved thread is unchanged", () =>
    Effect.gen(function*() {
      const history: Array<Message> = [
        M.human("list files", { id: "h1" }),
        aiCalls("a1", [call("c1", "ls")]),
        M.tool("stale", "gone", { id: "orphan", name: "ls" }),
        M.human("are you there?", { id: "h2" })
      ]
      const outcome = yield* H.run({ script: ["yes"], input: history, middlewares: () => [D.layer()] })
      const seen = outcome.requests[0]!.messages
      assert.deepStrictEqual(shape(seen), ["human:h1", "ai:a1", "tool:c1", "human:h2"])
      assert.deepStrictEqual(shape(outcome.state.messages).slice(0, 4), ["human:h1", "ai:a1", "tool:gone", "human:h2"])
    }).pipe(H.withStore))
})

/** A strict provider: a tool message must answer a call of the assistant message before it, and every call is answered. */
const strictProvider = (body: ScriptedChatServer.ChatRequestBody): ScriptedChatServer.Turn => {
  let open: Array<string> = []
  for (const message of body.messages) {
    if (message.role === "tool") {
      const id = message.tool_call_id as string
      if (!open.includes(id)) {
        const text = "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with " +
          `'tool_calls' (tool_call_id ${id}).`
        return { status: 400, body: ScriptedChatServer.errorBody(text, "invalid_request_error") }
      }
      open = open.filter((o) => o !== id)
      continue
    }
    if (open.length > 0) {
      const text = `An assistant message with 'tool_calls' must be followed by tool messages (missing ${open.join(", ")}).`
      return { status: 400, body: ScriptedChatServer.errorBody(text, "invalid_request_error") }
    }
    const calls = message.tool_calls as ReadonlyArray<{ id: string }> | undefined
    open = message.role === "assistant" ? (calls ?? []).map((c) => c.id) : []
  }
  return "Carrying on."
}

describe("DanglingToolCall on the wire", () => {
  it.scopedLive("calls kept only in the raw provider payload reach a strict provider with their results", () =>
    Effect.gen(function*() {
      const server = yield* ScriptedChatServer.start(strictProvider)
      const model = yield* OpenAiModel.make({ baseURL: server.url, apiKey: "test-key", model: "strict" })
      // An imported (LangChain-serialised) thread: the AI message has its calls only in additional_kwargs; one
      // of them was answered, the other was interrupted.
      const imported: Array<Message> = [
        M.human("look at both files", { id: "h1" }),
        M.ai("", {
          id: "a1",
          additional_kwargs: {
            tool_calls: [
              { id: "call_a", type: "function", function: { name: "read_file", arguments: "{\"path\":\"a.md\"}" } },
              { id: "call_b", type: "function", function: { name: "read_file", arguments: "{\"path\":\"b.md\"}" } }
            ]
          }
        }),
        M.tool("# A", "call_a", { id: "t1", name: "read_file" }),
        M.human("and now?", { id: "h2" })
      ]
      const end = yield* Run.execute(
        { threadId: "imported", input: imported },
        MW.stack([D.layer()], MW.base(model, Toolkit.make([])))
      )
      assert.strictEqual(end.status, "success", end.error?.message)
      // The body the openai client really sent: both calls, each followed by its result.
      const sent = server.requests[0]!.messages
      assert.deepStrictEqual(sent.map((m) => m.role), ["user", "assistant", "tool", "tool", "user"])
      assert.deepStrictEqual((sent[1]!.tool_calls as Array<any>).map((c) => [c.id, c.function.arguments]), [
        ["call_a", "{\"path\":\"a.md\"}"],
        ["call_b", "{\"path\":\"b.md\"}"]
      ])
      assert.deepInclude(sent[2]!, { tool_call_id: "call_a", content: "# A" })
      assert.strictEqual(sent[3]!.tool_call_id, "call_b")
      assert.include(String(sent[3]!.content), "interrupted")
      // The thread keeps what was imported (repairs are request-only).
      const thread = Option.getOrThrow(yield* (yield* ThreadStore).load("imported"))
      assert.deepStrictEqual(shape(thread.state.messages).slice(0, 4), ["human:h1", "ai:a1", "tool:call_a", "human:h2"])
    }).pipe(Effect.provide(MemoryThreadStore.layer())))

  it.scopedLive("without the middleware, the serializer still sends raw calls with their results", () =>
    Effect.gen(function*() {
      const server = yield* ScriptedChatServer.start(strictProvider)
      const model = yield* OpenAiModel.make({ baseURL: server.url, apiKey: "test-key", model: "strict" })
      const end = yield* Run.execute(
        {
          threadId: "imported-bare",
          input: [
            M.human("read it", { id: "h1" }),
            M.ai("", {
              id: "a1",
              additional_kwargs: { tool_calls: [{ id: "call_a", type: "function", function: { name: "ls", arguments: "" } }] }
            }),
            M.tool("a.md", "call_a", { id: "t1", name: "ls" }),
            M.human("and now?", { id: "h2" })
          ]
        },
        MW.base(model, Toolkit.make([]))
      )
      assert.strictEqual(end.status, "success", end.error?.message)
      const assistant = server.requests[0]!.messages[1]!
      assert.deepStrictEqual(assistant.tool_calls, [
        { id: "call_a", type: "function", function: { name: "ls", arguments: "{}" } }
      ])
    }).pipe(Effect.provide(MemoryThreadStore.layer())))
})

describe("DanglingToolCall: raw calls as DeerFlow reads them", () => {
  it.effect("a raw call's valid name wins over its empty function name; a call without any name is unknown_tool", () =>
    Effect.gen(function*() {
      const raw = (entry: Record<string, unknown>) =>
        M.ai("", { id: "a1", additional_kwargs: { tool_calls: [entry] } })
      const named = raw({ id: "c1", type: "function", name: "bash", function: { name: "", arguments: "{\"command\":\"ls\"}" } })
      assert.deepStrictEqual(D.effectiveCalls(named).map((c) => [c.name, c.blankName]), [["bash", false]])
      const nameless = raw({ id: "c2", type: "function", name: "", function: { name: " ", arguments: "{}" } })
      assert.deepStrictEqual(D.effectiveCalls(nameless).map((c) => [c.name, c.blankName]), [["unknown_tool", true]])
      // in a run: the call left open is answered as bash's, not as a call without a name
      const o = yield* H.run({
        input: [M.human("list the files"), named, M.human("go on")],
        script: ["ok"],
        middlewares: () => [D.layer()]
      })
      const answer = o.requests[0]!.messages.find((m): m is ToolMessage => m.type === "tool")!
      assert.strictEqual(answer.name, "bash")
      assert.notInclude(M.text(answer), "name was missing or empty")
    }).pipe(H.withStore))
})
