import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as MW from "../../src/middleware/Middleware.js"
import * as Title from "../../src/middleware/Title.js"
import * as Uploads from "../../src/middleware/Uploads.js"
import { TitleConfig } from "../../src/services/AppConfig.js"
import * as M from "../../src/state/Message.js"
import * as H from "../support/harness.js"

const config = (extra: Record<string, unknown> = {}) => Schema.decodeUnknownSync(TitleConfig)(extra)

describe("Title", () => {
  it("the local title is the first user message, cut after 50 characters", () => {
    assert.strictEqual(Title.fallbackTitle("  Plan a trip\nto Lyon ", 60), "Plan a trip to Lyon")
    const long = "Summarise every quarterly report from 2019 to 2025 and compare the margins"
    assert.strictEqual(Title.fallbackTitle(long, 60), "Summarise every quarterly report from 2019 to 2025...")
    assert.strictEqual(Title.fallbackTitle("   ", 60), "New Conversation")
  })

  // DeerFlow cuts titles with Python's str slicing: by characters (code points), never inside one.
  it("titles are cut by characters: an emoji counts once and is never split in half", () => {
    assert.strictEqual(Title.fallbackTitle("😀".repeat(60), 60), `${"😀".repeat(50)}...`)
    assert.strictEqual(Title.fallbackTitle(`a${"😀".repeat(60)}`, 40), `a${"😀".repeat(36)}...`)
    assert.strictEqual(Title.fallbackTitle("😀".repeat(50), 60), "😀".repeat(50))
    assert.strictEqual(Title.cleanTitle("😀".repeat(80), 61), "😀".repeat(61))
    const prompt = Title.titlePrompt(config({ prompt_template: "{user_msg}|{assistant_msg}" }), "😀".repeat(600), "")!
    assert.strictEqual(prompt, `${"😀".repeat(500)}|`)
  })

  it("a thread whose title is empty gets one, as in DeerFlow (a title is set when it is not empty)", () => {
    const user = M.human("Plan a trip to Lyon")
    assert.strictEqual(Title.due("", [user, M.ai("Sure.")]), user)
    assert.isUndefined(Title.due("Lyon", [user, M.ai("Sure.")]))
  })

  it.effect("the first exchange names the thread; later runs keep the name", () =>
    Effect.gen(function*() {
      const first = yield* H.run({ threadId: "t", input: "Plan a trip to Lyon", script: ["Sure."], middlewares: () => [Title.layer(config())] })
      assert.strictEqual(first.state.title, "Plan a trip to Lyon")
      const second = yield* H.run({ threadId: "t", input: "And Paris?", script: ["Also."], middlewares: () => [Title.layer(config())] })
      assert.strictEqual(second.state.title, "Plan a trip to Lyon")
    }).pipe(H.withStore))

  it.effect("with a title model, one internal call writes the title; the answer's tokens are the only ones streamed", () =>
    Effect.gen(function*() {
      const o = yield* H.run({
        input: "Plan a trip to Lyon",
        script: (request) => (request.internal === "title" ? "\"Lyon Trip Plan\"" : "Here is a plan."),
        middlewares: () => [Title.layer(config({ model_name: "small" }))]
      })
      assert.strictEqual(o.state.title, "Lyon Trip Plan")
      const titleCall = o.requests.find((r) => r.internal === "title")!
      assert.strictEqual(titleCall.settings.modelName, "small")
      assert.deepStrictEqual(o.events.filter((e) => e.type === "token").map((e) => (e as { text?: string }).text), ["Here is a plan."])
      assert.deepStrictEqual(o.state.messages.map(M.text), ["Plan a trip to Lyon", "Here is a plan."])
    }).pipe(H.withStore))

  it.effect("a failing title model falls back to the local title", () =>
    Effect.gen(function*() {
      const o = yield* H.run({
        input: "Plan a trip to Lyon",
        script: (request) => (request.internal === "title" ? undefined : "Here is a plan."),
        middlewares: () => [Title.layer(config({ model_name: "small" }))]
      })
      assert.strictEqual(o.state.title, "Plan a trip to Lyon")
    }).pipe(H.withStore))

  it.effect("disabled: no title", () =>
    Effect.gen(function*() {
      const o = yield* H.run({ script: ["ok"], middlewares: () => [Title.layer(config({ enabled: false }))] })
      assert.isNull(o.state.title)
    }).pipe(H.withStore))
})

describe("Title, as DeerFlow names a thread", () => {
  const titleCalls = (o: H.Outcome) => o.requests.filter((r) => r.internal === "title")

  it("the local title is cut to fit max_chars, `...` included, never longer", () => {
    const long = "Summarise every quarterly report from 2019 to 2025 and compare the margins"
    // DeerFlow keeps min(max_chars, 50) characters when `...` still fits within max_chars
    assert.strictEqual(Title.fallbackTitle(long, 60), `${long.slice(0, 50).trimEnd()}...`)
    assert.strictEqual(Title.fallbackTitle(long, 20), "Summarise every q...")
    for (let max = 10; max <= 200; max++) assert.isAtMost(Title.fallbackTitle(long.repeat(3), max).length, max)
    // DeerFlow's bounds: max_chars 10..200, max_words 1..20
    assert.throws(() => config({ max_chars: 2 }))
    assert.throws(() => config({ max_words: 0 }))
  })

  it.effect("title.prompt_template is the prompt the title model gets", () =>
    Effect.gen(function*() {
      const o = yield* H.run({
        input: "Plan a trip to Lyon",
        script: (request) => (request.internal === "title" ? "Lyon" : "Here is a plan."),
        middlewares: () => [
          Title.layer(config({ model_name: "small", prompt_template: "{max_words} words {{max}}: {user_msg} / {assistant_msg}" }))
        ]
      })
      assert.deepStrictEqual(titleCalls(o).map((r) => r.messages.map(M.text)), [[
        "6 words {max}: Plan a trip to Lyon / Here is a plan."
      ]])
      assert.strictEqual(o.state.title, "Lyon")
    }).pipe(H.withStore))

  it.effect("an invalid prompt template falls back to the local title without calling the model", () =>
    Effect.gen(function*() {
      for (const prompt_template of ["Title for {conversation}", "Title for {user_msg", "{0} {user_msg}"]) {
        const o = yield* H.run({
          threadId: prompt_template,
          input: "Plan a trip to Lyon",
          script: (request) => (request.internal === "title" ? "Lyon" : "Here is a plan."),
          middlewares: () => [Title.layer(config({ model_name: "small", prompt_template }))]
        })
        assert.deepStrictEqual(titleCalls(o), [])
        assert.strictEqual(o.state.title, "Plan a trip to Lyon")
      }
    }).pipe(H.withStore))

  it.effect("the title model is called with thinking off; <think> is removed from the prompt and from its answer", () =>
    Effect.gen(function*() {
      const o = yield* H.run({
        input: "Plan a trip to Lyon",
        script: (request) =>
          request.internal === "title"
            ? "<THINK>a short one</THINK>\n\"Lyon's Trip\""
            : "<think>They want a plan.</think>Here is a plan.",
        middlewares: () => [Title.layer(config({ model_name: "small" }))]
      })
      const [call] = titleCalls(o)
      assert.strictEqual(call?.settings.thinkingEnabled, false)
      const prompt = M.text(call!.messages[0]!)
      assert.include(prompt, "Assistant: Here is a plan.")
      assert.notInclude(prompt, "They want a plan")
      assert.strictEqual(o.state.title, "Lyon's Trip")
      assert.deepStrictEqual(o.events.filter((e) => e.type === "token").map((e) => (e as { text?: string }).text), [
        "<think>They want a plan.</think>Here is a plan."
      ])
    }).pipe(H.withStore))

  // DeerFlow's test_should_generate_title_with_dynamic_context_reminder skips its flagged reminders only; here any
  // hidden human message is not the user's, so a first turn with one is still titled (docs/deerflow.md)
  it.effect("hidden reminders are never taken as the user's message", () =>
    Effect.gen(function*() {
      const reminder = M.human("<system_reminder>Keep the todo list up to date.</system_reminder>", {
        name: "todo_reminder",
        additional_kwargs: { hide_from_ui: true }
      })
      const o = yield* H.run({
        input: [reminder, M.human("Plan a trip to Lyon")],
        script: ["Here is a plan."],
        middlewares: () => [Title.layer(config())]
      })
      assert.strictEqual(o.state.title, "Plan a trip to Lyon")
    }).pipe(H.withStore))

  // docs/deerflow.md: DeerFlow titles the content with the uploads block in front; Antler the user's words
  it("a message with uploaded files is titled by what the user wrote", () => {
    const block = "<uploaded_files>\n- a.pdf\n</uploaded_files>"
    const sent = Uploads.prependUploadsBlock(M.human("Sum up the report"), block)
    assert.strictEqual(Title.fallbackTitle(Title.userText(sent), 60), "Sum up the report")
  })

  it.effect("a run cancelled after the user's message still gets the local title", () =>
    Effect.gen(function*() {
      const o = yield* H.run({
        input: "Plan a trip to Lyon",
        script: ["never reached"],
        middlewares: () => [Title.layer(config()), MW.make({ model: () => Effect.interrupt })]
      })
      assert.strictEqual(o.end.status, "cancelled")
      assert.strictEqual(o.state.title, "Plan a trip to Lyon")
    }).pipe(H.withStore))
})
