import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Schema from "effect/Schema"
import * as ConfigFile from "../../src/layers/ConfigFile.js"
import * as S from "../../src/middleware/SafetyFinishReason.js"
import * as RunJournal from "../../src/programs/gateway/RunJournal.js"
import { EMPTY_DETECTORS_MESSAGE, SafetyFinishReasonConfig } from "../../src/services/AppConfig.js"
import * as Tool from "../../src/services/Tool.js"
import type { AIMessage } from "../../src/state/Message.js"
import * as M from "../../src/state/Message.js"
import * as Harness from "../support/harness.js"

const config = (input: Record<string, unknown> = {}) => Schema.decodeUnknownSync(SafetyFinishReasonConfig)(input)
const defaults = S.defaultDetectors()

const withMeta = (metadata: Record<string, unknown>, extra: Partial<AIMessage> = {}) =>
  M.ai("", { id: "ai-1", response_metadata: metadata, ...extra })

describe("SafetyFinishReason detectors", () => {
  it("OpenAI-compatible content_filter, case-insensitive, with Azure filter results as extras", () => {
    const azure = withMeta({ finish_reason: "Content_Filter", content_filter_results: { hate: { filtered: true } } })
    const hit = S.detect(azure, defaults)
    assert.deepStrictEqual(hit, {
      detector: "openai_compatible_content_filter",
      reason_field: "finish_reason",
      reason_value: "Content_Filter",
      extras: { content_filter_results: { hate: { filtered: true } } }
    })
  })

  it("Anthropic refusal and Gemini safety reasons (with safety ratings)", () => {
    assert.strictEqual(S.detect(withMeta({ stop_reason: "refusal" }), defaults)?.detector, "anthropic_refusal")
    const gemini = S.detect(withMeta({ finish_reason: "safety", safety_ratings: [{ category: "HARM" }] }), defaults)
    assert.strictEqual(gemini?.detector, "gemini_safety")
    assert.deepStrictEqual(gemini?.extras, { safety_ratings: [{ category: "HARM" }] })
    for (const reason of ["BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "RECITATION", "IMAGE_SAFETY"]) {
      assert.isDefined(S.detect(withMeta({ finish_reason: reason }), defaults), reason)
    }
  })

  it("ignores length and ordinary stops; reads additional_kwargs only when response_metadata has no value", () => {
    for (const finish of ["stop", "length", "MAX_TOKENS", "tool_calls", "OTHER"]) {
      assert.isUndefined(S.detect(withMeta({ finish_reason: finish }), defaults), finish)
    }
    assert.isDefined(S.detect(M.ai("", { additional_kwargs: { finish_reason: "content_filter" } }), defaults))
    const shadowed = M.ai("", {
      response_metadata: { finish_reason: "stop" },
      additional_kwargs: { finish_reason: "content_filter" }
    })
    assert.isUndefined(S.detect(shadowed, defaults))
  })

  // DeerFlow's detectors keep content_filter_results / safety_ratings only when truthy (`if filter_results:`)
  it("empty Azure filter results or Gemini ratings are not kept as extras", () => {
    for (const [finish, key] of [["content_filter", "content_filter_results"], ["SAFETY", "safety_ratings"]]) {
      for (const empty of [{}, [], 0]) {
        const hit = S.detect(withMeta({ finish_reason: finish, [key!]: empty }), defaults)
        assert.deepStrictEqual(hit?.extras, {}, `${key}: ${JSON.stringify(empty)}`)
      }
    }
  })

  it("a detector that throws counts as no hit", () => {
    const broken: S.Detector = { name: "broken", detect: () => { throw new Error("bug") } }
    const hit = S.detect(withMeta({ stop_reason: "refusal" }), [broken, ...defaults])
    assert.strictEqual(hit?.detector, "anthropic_refusal")
  })
})

describe("SafetyFinishReason.resolveDetectors", () => {
  it("uses the built-ins when none are configured", () => {
    const resolved = Either.getOrThrow(S.resolveDetectors(config()))
    assert.deepStrictEqual(
      resolved.map((d) => d.name),
      ["openai_compatible_content_filter", "anthropic_refusal", "gemini_safety"]
    )
  })

  it("resolves DeerFlow class paths and short names, with their settings", () => {
    const resolved = Either.getOrThrow(S.resolveDetectors(config({
      detectors: [
        {
          use: "deerflow.agents.middlewares.safety_termination_detectors:OpenAICompatibleContentFilterDetector",
          config: { finish_reasons: ["content_filter", "sensitive"] }
        },
        { use: "anthropic_refusal" }
      ]
    })))
    assert.deepStrictEqual(resolved.map((d) => d.name), ["openai_compatible_content_filter", "anthropic_refusal"])
    assert.isDefined(S.detect(withMeta({ finish_reason: "SENSITIVE" }), resolved))
    assert.isUndefined(S.detect(withMeta({ finish_reason: "SAFETY" }), resolved))
  })

  it("rejects an unknown detector or bad settings with a readable, located error", () => {
    const unknown = S.resolveDetectors(
      config({ detectors: [{ use: "anthropic_refusal" }, { use: "my.module:Custom" }] })
    )
    assert.isTrue(Either.isLeft(unknown))
    const error = Either.flip(unknown).pipe(Either.getOrThrow)
    assert.strictEqual(error.reason, "unknown_detector")
    assert.include(error.message, "safety_finish_reason.detectors[1]")
    assert.include(error.message, "gemini_safety")

    const typo = config({ detectors: [{ use: "gemini_safety", config: { finish_reason: ["SAFETY"] } }] })
    const bad = Either.flip(S.resolveDetectors(typo))
    const badError = Either.getOrThrow(bad)
    assert.strictEqual(badError.reason, "invalid_config")
    assert.include(badError.message, "safety_finish_reason.detectors[0].config")
    assert.include(badError.message, "finish_reason")
  })

  it.effect("an explicit empty list in config.yaml is refused, naming `detectors` and how to turn the guard off", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(
        ConfigFile.decode("safety_finish_reason:\n  detectors: []\n", "/etc/antler/config.yaml")
      )
      assert.deepStrictEqual(error.issues, [{ path: "safety_finish_reason.detectors", message: EMPTY_DETECTORS_MESSAGE }])
      assert.include(error.message, "/etc/antler/config.yaml: safety_finish_reason.detectors: ")
      assert.include(error.message, "`enabled: false`")
      const bypassed = Either.flip(S.resolveDetectors({ enabled: true, detectors: [] })).pipe(Either.getOrThrow)
      assert.strictEqual(bypassed.reason, "no_detectors")
      assert.strictEqual(bypassed.message, `safety_finish_reason.detectors: ${EMPTY_DETECTORS_MESSAGE}`)
    }))
})

describe("SafetyFinishReason decision", () => {
  it("looks only at responses that call tools or show no text", () => {
    const visible = M.ai("I can't help with that.", { response_metadata: { finish_reason: "content_filter" } })
    assert.isFalse(S.shouldInspect(visible))
    assert.isTrue(S.shouldInspect(M.ai("   ")))
    assert.isTrue(S.shouldInspect(M.ai("text", { tool_calls: [{ id: "c", name: "bash", args: {} }] })))
  })

  it("terminate removes the calls, keeps the provider finish reason and records names only", () => {
    const message = M.ai("Partial", {
      id: "ai-9",
      tool_calls: [{ id: "c1", name: "write_file", args: { path: "/x", content: "secret payload" } }],
      invalid_tool_calls: [{ id: "c2", name: null, args: "{", error: "bad" }],
      response_metadata: { finish_reason: "content_filter" }
    })
    const hit = S.detect(message, defaults)!
    const { message: out, record } = S.terminate(message, hit)
    assert.strictEqual(out.id, "ai-9")
    assert.isFalse(M.hasToolCalls(out))
    assert.strictEqual(out.response_metadata?.finish_reason, "content_filter")
    assert.deepStrictEqual(record.suppressed_tool_call_names, ["write_file", "unknown"])
    assert.strictEqual(record.suppressed_tool_call_count, 2)
    assert.deepStrictEqual(out.additional_kwargs?.safety_termination, record)
    const text = M.text(out)
    assert.isTrue(text.startsWith("Partial\n\n"))
    assert.include(text, "finish_reason='content_filter'")
    assert.include(text, "Any tool calls produced in this turn were suppressed")
    // DeerFlow's test_safety_finish_reason_middleware: the explanation names a "safety-related signal"
    assert.include(text, "safety-related signal")
    assert.notInclude(JSON.stringify(record), "secret payload")
  })

  // DeerFlow's suppressed names: `tc.get("name") or "unknown"`
  it("a suppressed call without a name is named unknown in the record", () => {
    const message = M.ai("", {
      tool_calls: [{ id: "c1", name: "", args: {} }, { id: "c2", name: "bash", args: {} }],
      response_metadata: { finish_reason: "content_filter" }
    })
    const { record } = S.terminate(message, S.detect(message, defaults)!)
    assert.deepStrictEqual(record.suppressed_tool_call_names, ["unknown", "bash"])
  })
})

describe("SafetyFinishReason.layer", () => {
  const bash = Tool.make({
    name: "bash",
    description: "Run",
    parameters: Schema.Struct({ command: Schema.String }),
    handler: () => Effect.succeed("ran")
  })

  it.effect("a refusal with no content gets an explanation and ends safety_capped", () =>
    Effect.gen(function*() {
      const out = yield* Harness.run({
        script: [{ content: "", responseMetadata: { stop_reason: "refusal" } }],
        middlewares: () => [S.layer()]
      })
      assert.strictEqual(out.end.stop_reason, "safety_capped")
      const text = M.text(out.state.messages.at(-1)!)
      assert.include(text, "stop_reason='refusal'")
      assert.include(text, "safety-related signal")
      assert.include(text, "returned no content")
    }).pipe(Harness.withStore))

  it.effect("a filtered response that still has text and no calls is left untouched", () =>
    Effect.gen(function*() {
      const out = yield* Harness.run({
        script: [{ content: "Here is a safe partial answer.", finishReason: "content_filter" }],
        middlewares: () => [S.layer()]
      })
      assert.strictEqual(out.end.stop_reason, "completed")
      assert.strictEqual(out.state.messages.at(-1)!.content, "Here is a safe partial answer.")
      assert.isFalse(out.events.some((e) => e.type === "custom"))
    }).pipe(Harness.withStore))

  // DeerFlow's test_records_audit_event_when_journal_present / test_audit_event_never_carries_tool_arguments
  it.effect("the run journal keeps a middleware:safety_termination audit record: names and ids, never arguments", () =>
    Effect.gen(function*() {
      const out = yield* Harness.run({
        script: [{
          toolCalls: [{ id: "call_write_1", name: "write_file", args: { content: "FILTERED_CONTENT_DO_NOT_PERSIST" } }],
          finishReason: "content_filter"
        }],
        tools: [bash],
        middlewares: () => [S.layer()]
      })
      const journal = RunJournal.make(() => "2026-01-01T00:00:00.000Z")
      journal.push(out.events)
      const audits = journal.events().filter((e) => e.event_type === "middleware:safety_termination")
      assert.lengthOf(audits, 1)
      assert.strictEqual(audits[0]!.category, "middleware")
      const content = audits[0]!.content as Record<string, any>
      assert.deepInclude(content, {
        name: "SafetyFinishReasonMiddleware",
        hook: "after_model",
        action: "suppress_tool_calls"
      })
      assert.deepInclude(content.changes, {
        detector: "openai_compatible_content_filter",
        reason_field: "finish_reason",
        reason_value: "content_filter",
        suppressed_tool_call_count: 1,
        suppressed_tool_call_names: ["write_file"],
        suppressed_tool_call_ids: ["call_write_1"]
      })
      assert.property(content.changes, "message_id")
      assert.isObject(content.changes.extras)
      assert.notInclude(JSON.stringify(audits), "FILTERED_CONTENT_DO_NOT_PERSIST")
      assert.notProperty(content.changes, "args")
    }).pipe(Harness.withStore))

  it.effect("programmatic detectors replace the configured ones", () =>
    Effect.gen(function*() {
      let ran = 0
      const counted = Tool.make({ ...bash, handler: () => Effect.sync(() => (ran++, "ran")) })
      const gateway: S.Detector = {
        name: "gateway_violation",
        detect: (m) =>
          m.response_metadata?.finish_reason === "violation"
            ? { detector: "gateway_violation", reason_field: "finish_reason", reason_value: "violation", extras: {} }
            : undefined
      }
      const out = yield* Harness.run({
        script: [{ toolCalls: [{ name: "bash", args: { command: "ls" } }], finishReason: "violation" }],
        tools: [counted],
        middlewares: () => [S.layer({ detectors: [gateway] })]
      })
      assert.strictEqual(ran, 0)
      assert.strictEqual(out.end.stop_reason, "safety_capped")
    }).pipe(Harness.withStore))

  it.effect("given detectors are copied: changing the caller's array later does not change the guard", () =>
    Effect.gen(function*() {
      let ran = 0
      const counted = Tool.make({ ...bash, handler: () => Effect.sync(() => (ran++, "ran")) })
      const detectors: Array<S.Detector> = [S.openAiContentFilter()]
      const guard = S.layer({ detectors })
      detectors.length = 0
      const out = yield* Harness.run({
        script: [{ toolCalls: [{ name: "bash", args: { command: "ls" } }], finishReason: "content_filter" }, "done"],
        tools: [counted],
        middlewares: () => [guard]
      })
      assert.strictEqual(ran, 0)
      assert.strictEqual(out.end.stop_reason, "safety_capped")
    }).pipe(Harness.withStore))

  it.effect("an empty list of given detectors fails the run, saying `enabled: false` turns the guard off", () =>
    Effect.gen(function*() {
      const out = yield* Harness.run({ script: ["hello"], middlewares: () => [S.layer({ detectors: [] })] })
      assert.strictEqual(out.end.status, "error")
      assert.strictEqual(out.end.error?.name, "SafetyDetectorConfigError")
      assert.strictEqual(out.end.error?.message, `detectors: ${EMPTY_DETECTORS_MESSAGE}`)
    }).pipe(Harness.withStore))

  it.effect("a bad detector config fails the run with the typed error instead of running unguarded", () =>
    Effect.gen(function*() {
      const out = yield* Harness.run({
        script: ["hello"],
        middlewares: () => [S.layer({ config: config({ detectors: [{ use: "nope" }] }) })]
      })
      assert.strictEqual(out.end.status, "error")
      assert.strictEqual(out.end.error?.name, "SafetyDetectorConfigError")
      assert.include(out.end.error?.message ?? "", "safety_finish_reason.detectors[0]")
    }).pipe(Harness.withStore))

  it.effect("disabled: tool calls of a filtered response run", () =>
    Effect.gen(function*() {
      const out = yield* Harness.run({
        script: [{ toolCalls: [{ name: "bash", args: { command: "ls" } }], finishReason: "content_filter" }, "done"],
        tools: [bash],
        middlewares: () => [S.layer({ config: config({ enabled: false }) })]
      })
      assert.strictEqual(out.end.stop_reason, "completed")
      assert.strictEqual(out.state.messages.filter((m) => m.type === "tool").length, 1)
    }).pipe(Harness.withStore))
})
