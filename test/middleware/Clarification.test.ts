import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as Clarification from "../../src/middleware/Clarification.js"
import * as Tool from "../../src/services/Tool.js"
import * as M from "../../src/state/Message.js"
import * as H from "../support/harness.js"

let echoed = 0
const echo = Tool.make({
  name: "echo",
  description: "Echoes.",
  parameters: Schema.Struct({ text: Schema.String }),
  handler: ({ text }) => Effect.sync(() => (echoed++, `echo: ${text}`))
})

const ask = (args: Record<string, unknown>, id = "call-ask") => ({
  toolCalls: [{ name: "ask_clarification", args: { clarification_type: "approach_choice", ...args }, id }]
})

describe("Clarification helpers", () => {
  it("options: JSON-string arrays parsed, objects flattened, tags stripped, blanks and duplicates dropped", () => {
    assert.deepStrictEqual(Clarification.normalizeOptions("[\"a\", \"b\"]"), ["a", "b"])
    assert.deepStrictEqual(Clarification.normalizeOptions([{ label: "<b>Fast</b>" }, { label: "Safe" }, " ", "Safe"]), [
      "Fast",
      "Safe"
    ])
    assert.deepStrictEqual(Clarification.normalizeOptions("just one"), ["just one"])
  })

  it("a form is all or nothing: one bad field drops the whole form", () => {
    const good = Clarification.normalizeFields([
      { name: "city", required: "true" },
      { name: "mode", type: "select", options: ["car", "train"] },
      { name: "notes", type: "select" },
      { name: "when", type: "weird" }
    ])!
    assert.deepStrictEqual(good.map((f) => [f.name, f.type, f.required]), [
      ["city", "text", true],
      ["mode", "select", false],
      ["notes", "text", false],
      ["when", "text", false]
    ])
    assert.deepStrictEqual(good[1]!.options!.map((o) => o.id), ["mode-option-1", "mode-option-2"])
    assert.isUndefined(Clarification.normalizeFields([{ name: "a" }, { name: "a" }]))
    assert.isUndefined(Clarification.normalizeFields([{ name: "__proto__" }]))
    assert.isUndefined(Clarification.normalizeFields([{ name: "ok" }, "not an object"]))
    assert.isUndefined(Clarification.normalizeFields(Array.from({ length: 17 }, (_, i) => ({ name: `f${i}` }))))
  })

  it("the request and its display carry the question, the context and numbered options", () => {
    const req = Clarification.request(
      { question: "Which format?", clarification_type: "approach_choice", context: "Two formats fit.", options: ["CSV", "JSON"] },
      "call-1"
    )
    assert.strictEqual(req.request_id, "clarification:call-1")
    assert.strictEqual(req.input_mode, "choice_with_other")
    assert.strictEqual(Clarification.display(req), "🔀 Two formats fit.\nWhich format?\n  1. CSV\n  2. JSON")
    const free = Clarification.request({ question: "Name?", clarification_type: "missing_info" }, "")
    assert.match(free.request_id, /^clarification:[0-9a-f]{16}$/)
    assert.strictEqual(free.input_mode, "free_text")
    assert.strictEqual(Clarification.display(free), "❓ Name?")
  })

  it("an answer by number or label selects the option; anything else is free text", () => {
    const req = Clarification.request(
      { question: "Which?", clarification_type: "approach_choice", options: ["CSV", "JSON"] },
      "c"
    )
    const byNumber = Clarification.answer(req, "2")
    assert.strictEqual(M.text(byNumber), "JSON")
    assert.deepStrictEqual(byNumber.additional_kwargs?.human_input_response, {
      version: 1,
      kind: "human_input_response",
      source: "ask_clarification",
      request_id: "clarification:c",
      response_kind: "option",
      value: "JSON",
      option_id: "option-2"
    })
    assert.strictEqual((Clarification.answer(req, "csv").additional_kwargs?.human_input_response as any).option_id, "option-1")
    assert.strictEqual((Clarification.answer(req, "YAML please").additional_kwargs?.human_input_response as any).response_kind, "text")
    assert.isTrue(Clarification.isAnswer(byNumber.additional_kwargs))
  })
})

describe("Clarification in a run", () => {
  it.effect("the run ends right after the question, waiting; the answer resumes the thread in order", () =>
    Effect.gen(function*() {
      const first = yield* H.run({
        threadId: "clarify",
        input: "Export the data",
        script: [ask({ question: "Which format?", options: ["CSV", "JSON"] }), "never reached"],
        middlewares: () => [Clarification.layer()]
      })
      assert.strictEqual(first.end.status, "interrupted")
      assert.strictEqual(first.requests.length, 1)
      const req = first.end.interrupt as Clarification.HumanInputRequest
      assert.strictEqual(req.question, "Which format?")
      assert.deepStrictEqual(req.options?.map((o) => o.label), ["CSV", "JSON"])
      const last = first.state.messages[first.state.messages.length - 1]!
      assert.strictEqual(last.type, "tool")
      assert.deepStrictEqual((last as M.ToolMessage).artifact, { human_input: req })
      assert.deepStrictEqual(Clarification.pending(first.state.messages), req)

      const second = yield* H.run({
        threadId: "clarify",
        input: [Clarification.answer(req, "1")],
        script: ["Exporting as CSV."],
        middlewares: () => [Clarification.layer()]
      })
      assert.strictEqual(second.end.stop_reason, "completed")
      const seen = second.requests[0]!.messages
      assert.deepStrictEqual(seen.map((m) => m.type), ["human", "ai", "tool", "human"])
      assert.strictEqual(M.toolCalls(seen[1]!)[0]!.name, "ask_clarification")
      assert.match(M.text(seen[2]!), /Which format\?\n {2}1\. CSV\n {2}2\. JSON/)
      assert.strictEqual(M.text(seen[3]!), "CSV")
      assert.isUndefined(Clarification.pending(second.state.messages))
    }).pipe(H.withStore))

  it.effect("other calls of the same response still run, then the run waits", () =>
    Effect.gen(function*() {
      echoed = 0
      const o = yield* H.run({
        script: [{ toolCalls: [...ask({ question: "Sure?" }).toolCalls, { name: "echo", args: { text: "x" } }] }],
        tools: [echo],
        middlewares: () => [Clarification.layer()]
      })
      assert.strictEqual(o.end.status, "interrupted")
      assert.strictEqual(echoed, 1)
      assert.deepStrictEqual(o.state.messages.filter((m) => m.type === "tool").map((m) => m.name), [
        "ask_clarification",
        "echo"
      ])
    }).pipe(H.withStore))

  it.effect("in a non-interactive run the model is told nobody can answer, and the run goes on", () =>
    Effect.gen(function*() {
      const o = yield* H.run({
        script: [ask({ question: "Which?" }), "Assuming CSV."],
        options: { nonInteractive: true },
        middlewares: () => [Clarification.layer()]
      })
      assert.strictEqual(o.end.stop_reason, "completed")
      assert.match(M.text(o.state.messages[2]!), /Nobody can answer/)
      assert.strictEqual(M.text(o.state.messages[3]!), "Assuming CSV.")
    }).pipe(H.withStore))

  it.effect("a malformed call is refused with the bad field named, without stopping the run", () =>
    Effect.gen(function*() {
      const o = yield* H.run({
        script: [
          { toolCalls: [{ name: "ask_clarification", args: { question: "Which?", clarification_type: "vibes" } }] },
          "ok"
        ],
        middlewares: () => [Clarification.layer()]
      })
      assert.strictEqual(o.end.stop_reason, "completed")
      assert.match(M.text(o.state.messages[2]!), /^Error: Invalid arguments for tool 'ask_clarification': clarification_type/)
    }).pipe(H.withStore))
})
