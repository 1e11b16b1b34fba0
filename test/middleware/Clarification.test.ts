import { assert, describe, it } from "@effect/vitest"
import { createHash } from "node:crypto"
import * as Effect from "effect/Effect"
import * as FC from "effect/FastCheck"
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
  const labels = (raw: unknown) => Clarification.normalizeOptions(raw).map((o) => o.label)

  it("options: JSON-string arrays parsed, tags stripped, blanks and duplicates dropped", () => {
    assert.deepStrictEqual(labels("[\"a\", \"b\"]"), ["a", "b"])
    assert.deepStrictEqual(labels(["<b>Fast</b>", "Safe", " ", "Safe", "a < b"]), ["Fast", "Safe", "a < b"])
    assert.deepStrictEqual(labels("just one"), ["just one"])
  })

  it("options: null is no options; a JSON-quoted string is its text, without the quotes", () => {
    assert.deepStrictEqual(labels(null), [])
    assert.deepStrictEqual(labels("null"), [])
    assert.deepStrictEqual(labels("\"development\""), ["development"])
    assert.deepStrictEqual(labels(["\"dev\"", "\"prod\""]), ["dev", "prod"])
    assert.deepStrictEqual(labels(7), ["7"])
  })

  // DeerFlow test_clarification_middleware.py::test_json_string_with_mixed_types / test_payload_with_json_string_options
  // and test_dict_options_recursively_flatten_string_and_number_values: an option that is not a string is shown as
  // Python's str() prints it
  it("options: a value that is not a string is shown as Python prints it (True, False, None, repr)", () => {
    const mixed = Clarification.request({
      question: "Pick one",
      clarification_type: "approach_choice",
      options: JSON.stringify(["Option A", 2, true, null])
    }, "c1")
    const text = Clarification.display(mixed)
    for (const line of ["1. Option A", "2. 2", "3. True", "4. None"]) assert.include(text, line)
    assert.deepStrictEqual(mixed.options?.slice(2), [
      { id: "option-3", label: "True", value: "True" },
      { id: "option-4", label: "None", value: "None" }
    ])
    assert.deepStrictEqual(labels([false, ["a", "it's", 1.5], { k: null, "x\"y": [true] }]), [
      "False",
      "['a', \"it's\", 1.5]",
      "{'k': None, 'x\"y': [True]}"
    ])
    assert.deepStrictEqual(labels("true"), ["True"])
    // a dictionary gives its string and number leaves (None is no leaf)
    assert.deepStrictEqual(labels({ item: [["First</item>"], { $text: 2 }], $text: null }), ["First", "2"])
    assert.deepStrictEqual(labels({ a: true }), ["True"])
  })

  it("options: objects are one choice each (label shown, value answered); a dictionary gives its leaves in order", () => {
    assert.deepStrictEqual(
      Clarification.normalizeOptions([{ label: "Dev", value: "dev" }, { label: "<i>Prod</i>", value: "prod" }]),
      [{ label: "Dev", value: "dev" }, { label: "Prod", value: "prod" }]
    )
    assert.deepStrictEqual(labels([{ value: "staging" }, { text: "QA" }]), ["staging", "QA"])
    // What an XML-ish tool call parses to: `<options><option>Dev</option><option><b>Prod</b></option></options>`.
    assert.deepStrictEqual(labels({ options: { option: ["Dev", "<b>Prod</b>"] }, other: { note: "QA", n: 3 } }), [
      "Dev",
      "Prod",
      "QA",
      "3"
    ])
  })

  it("fields: a JSON-encoded list is a form; options of a non-select field do not count against it", () => {
    const form = Clarification.normalizeFields(JSON.stringify([
      { name: "env", type: "select", options: "[\"dev\", \"prod\"]", required: 1 },
      { name: "notes", options: Array.from({ length: 30 }, (_, i) => `o${i}`), placeholder: "  optional  " }
    ]))!
    assert.deepStrictEqual(form.map((f) => [f.name, f.type, f.required]), [["env", "select", true], ["notes", "text", false]])
    assert.deepStrictEqual(form[0]!.options, [
      { id: "env-option-1", label: "dev", value: "dev" },
      { id: "env-option-2", label: "prod", value: "prod" }
    ])
    assert.strictEqual(form[1]!.placeholder, "optional")
    assert.isUndefined(Clarification.normalizeFields("[{\"name\": "))
    assert.isUndefined(Clarification.normalizeFields(null))
  })

  // DeerFlow test_serialized_fields_over_byte_budget_degrade_whole_form, test_overlong_field_text_degrades_whole_form:
  // its limits measured as it measures them (json.dumps writes ", " and ": "; len counts characters, not UTF-16)
  it("a form's limits are DeerFlow's measures: json.dumps bytes, characters not UTF-16 units", () => {
    const form = (n: number) =>
      ["f0", "f1"].map((name) => ({
        name,
        type: "select",
        options: Array.from({ length: 24 }, (_, j) => `${j}`.padStart(n, "x"))
      }))
    // 16,351 bytes as JSON.stringify writes it, 16,656 as json.dumps does: over the 16,384 budget
    assert.isUndefined(Clarification.normalizeFields(form(147)))
    assert.isDefined(Clarification.normalizeFields(form(144)))
    assert.isDefined(Clarification.normalizeFields([{ name: "mood", label: "😀".repeat(200) }]))
    assert.isUndefined(Clarification.normalizeFields([{ name: "mood", label: "😀".repeat(201) }]))
  })

  it("the tool's schema describes the form's fields, so models need not guess their shape", () => {
    const parameters = Tool.definition(Clarification.tool).parameters as any
    assert.deepStrictEqual(parameters.required, ["question", "clarification_type"])
    assert.deepStrictEqual(parameters.properties.clarification_type.enum, [...Clarification.CLARIFICATION_TYPES])
    assert.deepStrictEqual(parameters.properties.options.items, { type: "string" })
    const item = parameters.properties.fields.items
    assert.strictEqual(parameters.properties.fields.type, "array")
    assert.deepStrictEqual(item.required, ["name"])
    assert.deepStrictEqual(Object.keys(item.properties), ["name", "label", "type", "required", "options", "placeholder"])
    assert.deepStrictEqual(item.properties.type.enum, [...Clarification.FIELD_TYPES])
    assert.strictEqual(item.properties.required.type, "boolean")
    assert.deepStrictEqual(item.properties.options.items, { type: "string" })
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
    assert.isUndefined(
      Clarification.normalizeFields([{ name: "x", type: "select", options: Array.from({ length: 25 }, (_, i) => `${i}`) }])
    )
  })

  it("the request and its display carry the question, the context and numbered options", () => {
    const req = Clarification.request(
      { question: "Which format?", clarification_type: "approach_choice", context: "Two formats fit.", options: ["CSV", "JSON"] },
      "call-1"
    )
    assert.strictEqual(req.request_id, "clarification:call-1")
    assert.strictEqual(req.input_mode, "choice_with_other")
    assert.strictEqual(Clarification.display(req), "🔀 Two formats fit.\n\nWhich format?\n\n  1. CSV\n  2. JSON")
    const free = Clarification.request({ question: "Name?", clarification_type: "missing_info" }, "")
    // without a call id, DeerFlow's: the hash of the text shown
    const digest = createHash("sha256").update("❓ Name?").digest("hex").slice(0, 16)
    assert.strictEqual(free.request_id, `clarification:${digest}`)
    assert.strictEqual(free.input_mode, "free_text")
    assert.strictEqual(Clarification.display(free), "❓ Name?")
  })

  // DeerFlow's _format_clarification_message (test_context_included, test_form_fallback_text_lists_fields): the
  // context, the question and the options or fields are paragraphs of their own, fields in its words.
  it("the display is DeerFlow's: blank lines between context, question and choices; its form wording", () => {
    const choice = Clarification.request(
      { question: "Which format?", clarification_type: "approach_choice", context: "Two formats fit.", options: ["CSV", "JSON"] },
      "call-1"
    )
    assert.strictEqual(Clarification.display(choice), "🔀 Two formats fit.\n\nWhich format?\n\n  1. CSV\n  2. JSON")
    const form = Clarification.request({
      question: "Please provide the expense details.",
      clarification_type: "missing_info",
      fields: [
        { name: "amount", label: "Amount", type: "number", required: true },
        { name: "category", label: "Category", type: "select", options: ["travel", "meals"], required: true },
        { name: "receipts", label: "Receipts", type: "multi_select", options: ["A-1", "A-2"] },
        { name: "note", type: "textarea" }
      ]
    }, "call-2")
    assert.strictEqual(
      Clarification.display(form),
      [
        "❓ Please provide the expense details.",
        "",
        "  1. Amount (required)",
        "  2. Category (required) — options: travel / meals",
        "  3. Receipts — options: A-1 / A-2 (multiple allowed)",
        "  4. note",
        "",
        "Please reply with a value for each field."
      ].join("\n")
    )
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
    const labelled = Clarification.request(
      { question: "Where?", clarification_type: "approach_choice", options: [{ label: "Development", value: "dev" }] },
      "d"
    )
    assert.strictEqual(Clarification.display(labelled), "🔀 Where?\n\n  1. Development")
    assert.strictEqual(M.text(Clarification.answer(labelled, "1")), "dev")
    assert.strictEqual(M.text(Clarification.answer(labelled, "DEV")), "dev")
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
      assert.match(M.text(seen[2]!), /Which format\?\n\n {2}1\. CSV\n {2}2\. JSON/)
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

  it.effect("ask_clarification is not offered where nobody can answer (DeerFlow removes the tool)", () =>
    Effect.gen(function*() {
      const offered = (o: { requests: ReadonlyArray<{ tools: ReadonlyArray<{ name: string }> }> }) =>
        o.requests[0]!.tools.map((t) => t.name)
      const alone = yield* H.run({
        script: ["Done."],
        tools: [echo],
        options: { nonInteractive: true },
        middlewares: () => [Clarification.layer()]
      })
      assert.deepStrictEqual(offered(alone), ["echo"])
      const interactive = yield* H.run({ script: ["Done."], tools: [echo], middlewares: () => [Clarification.layer()] })
      assert.deepStrictEqual(offered(interactive), ["echo", "ask_clarification"])
    }).pipe(H.withStore))

  it.effect("in a non-interactive run a call made anyway is told nobody can answer, and the run goes on", () =>
    Effect.gen(function*() {
      const o = yield* H.run({
        script: [ask({ question: "Which?" }), "Assuming CSV."],
        options: { nonInteractive: true },
        middlewares: () => [Clarification.layer()]
      })
      assert.strictEqual(o.end.stop_reason, "completed")
      // DeerFlow test_disabled_message_tells_agent_to_proceed: its words, which say "disabled" and "proceed"
      assert.strictEqual(M.text(o.state.messages[2]!), Clarification.DISABLED)
      assert.match(M.text(o.state.messages[2]!), /^Clarification is disabled in this context/)
      assert.include(M.text(o.state.messages[2]!).toLowerCase(), "proceed")
      assert.isUndefined((o.state.messages[2] as M.ToolMessage).artifact)
      assert.strictEqual(M.text(o.state.messages[3]!), "Assuming CSV.")
    }).pipe(H.withStore))

  it.effect("what models really send is asked, not refused: null options and context, an unknown type", () =>
    Effect.gen(function*() {
      const o = yield* H.run({
        script: [{
          toolCalls: [{
            name: "ask_clarification",
            args: { question: "Which environment?", clarification_type: "env_choice", options: null, context: null },
            id: "call-null"
          }]
        }],
        middlewares: () => [Clarification.layer()]
      })
      assert.strictEqual(o.end.status, "interrupted")
      const req = o.end.interrupt as Clarification.HumanInputRequest
      assert.strictEqual(req.clarification_type, "env_choice")
      assert.strictEqual(req.input_mode, "free_text")
      assert.isUndefined(req.context)
      assert.strictEqual(M.text(o.state.messages[2]!), "❓ Which environment?")
    }).pipe(H.withStore))

  // DeerFlow test_unhashable_clarification_type_does_not_crash: a kind that is not text is still asked
  it.effect("a kind of question that is not text, or none, is asked all the same (as DeerFlow's str() reads it)", () =>
    Effect.gen(function*() {
      const asked = (args: Record<string, unknown>) =>
        Effect.map(
          H.run({
            script: [{ toolCalls: [{ name: "ask_clarification", args: { question: "q?", ...args }, id: "c1" }] }],
            middlewares: () => [Clarification.layer()]
          }),
          (o) => ({ o, req: o.end.interrupt as Clarification.HumanInputRequest })
        )
      const list = yield* asked({ clarification_type: [], fields: [{ name: "amount", type: [] }] })
      assert.strictEqual(list.o.end.status, "interrupted")
      assert.strictEqual(list.req.input_mode, "form")
      assert.strictEqual(list.req.clarification_type, "[]")
      assert.strictEqual(list.req.fields?.[0]?.type, "text")
      assert.match(M.text(list.o.state.messages.at(-1)!), /^❓ q\?/)
      const missing = yield* asked({})
      assert.strictEqual(missing.o.end.status, "interrupted")
      assert.strictEqual(missing.req.clarification_type, "missing_info")
    }).pipe(H.withStore))

  it.effect("options as objects or a JSON-quoted string, fields as a JSON string: all asked as meant", () =>
    Effect.gen(function*() {
      const asked = (args: Record<string, unknown>) =>
        Effect.map(
          H.run({ script: [ask({ question: "Which?", ...args })], middlewares: () => [Clarification.layer()] }),
          (o) => ({ req: o.end.interrupt as Clarification.HumanInputRequest, text: M.text(o.state.messages.at(-1)!) })
        )
      const objects = yield* asked({ options: [{ label: "Dev", value: "dev" }, { label: "Prod", value: "prod" }] })
      assert.strictEqual(objects.text, "🔀 Which?\n\n  1. Dev\n  2. Prod")
      assert.deepStrictEqual(objects.req.options?.map((o) => o.value), ["dev", "prod"])
      const quoted = yield* asked({ options: "\"development\"" })
      assert.strictEqual(quoted.text, "🔀 Which?\n\n  1. development")
      const form = yield* asked({ fields: JSON.stringify([{ name: "env", type: "select", options: ["dev", "prod"] }]) })
      assert.strictEqual(form.req.input_mode, "form")
      assert.strictEqual(form.req.version, 2)
      assert.strictEqual(form.text, "🔀 Which?\n\n  1. env — options: dev / prod\n\nPlease reply with a value for each field.")
    }).pipe(H.withStore))

  it.effect("a call without a question is refused with the field named, without stopping the run", () =>
    Effect.gen(function*() {
      const o = yield* H.run({
        script: [
          { toolCalls: [{ name: "ask_clarification", args: { clarification_type: "missing_info", options: ["a"] } }] },
          "ok"
        ],
        middlewares: () => [Clarification.layer()]
      })
      assert.strictEqual(o.end.stop_reason, "completed")
      assert.match(M.text(o.state.messages[2]!), /^Error: Invalid arguments for tool 'ask_clarification': question/)
    }).pipe(H.withStore))
})

describe("Clarification, whatever JSON the model sends", () => {
  it.prop("options, fields and field types of any JSON type never crash the request or its text", [
    FC.jsonValue(),
    FC.jsonValue(),
    FC.jsonValue()
  ], ([options, fields, type]) => {
    for (const f of [fields, [{ name: "a", type, options, label: type, placeholder: type, required: type }]]) {
      const req = Clarification.request(
        { question: "Which?", clarification_type: "approach_choice", options, fields: f, context: type },
        "c1"
      )
      assert.isString(Clarification.display(req))
    }
  })

  it.effect("options nested thousands deep: the question is still asked, with the options it can read", () =>
    Effect.gen(function*() {
      let deep: unknown = "CSV"
      for (let i = 0; i < 20000; i++) deep = [deep]
      let deepObject: unknown = "JSON"
      for (let i = 0; i < 20000; i++) deepObject = { a: deepObject }
      const o = yield* H.run({
        input: "Export the data",
        script: [ask({ question: "Which format?", options: [deep, "TSV", deepObject] })],
        middlewares: () => [Clarification.layer()]
      })
      assert.strictEqual(o.end.status, "interrupted")
      const req = o.end.interrupt as Clarification.HumanInputRequest
      assert.strictEqual(req.question, "Which format?")
      assert.deepStrictEqual(req.options?.map((x) => x.label), ["TSV"])
      const form = Clarification.request({
        question: "Details?",
        clarification_type: "missing_info",
        fields: [{ name: "format", type: "select", options: [deep, "CSV", "TSV"] }]
      }, "c2")
      assert.deepStrictEqual(form.fields?.[0]?.options?.map((x) => x.label), ["CSV", "TSV"])
    }).pipe(H.withStore))
})
