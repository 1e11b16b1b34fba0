/**
 * DeerFlow's test_safety_termination_detectors, case by case: which provider stop signals make SafetyFinishReason
 * drop a response's tool calls (and tell the user why), and what the `safety_termination` record carries.
 * `TestProtocolConformance` (a runtime-checkable Protocol, a frozen dataclass) is Python machinery: not ported.
 */
import { assert, describe, it } from "@effect/vitest"
import * as S from "../../src/middleware/SafetyFinishReason.js"
import type { AIMessage, JsonObject } from "../../src/state/Message.js"
import * as M from "../../src/state/Message.js"

const ai = (options: { response_metadata?: JsonObject; additional_kwargs?: JsonObject } = {}): AIMessage =>
  M.ai("", { id: "ai-1", ...options })

describe("test_safety_termination_detectors: TestOpenAICompatibleContentFilterDetector", () => {
  const d = S.openAiContentFilter()

  it("test_default_matches_content_filter", () => {
    const hit = d.detect(ai({ response_metadata: { finish_reason: "content_filter" } }))
    assert.strictEqual(hit?.detector, "openai_compatible_content_filter")
    assert.strictEqual(hit?.reason_field, "finish_reason")
    assert.strictEqual(hit?.reason_value, "content_filter")
  })

  it("test_case_insensitive_match", () => {
    assert.isDefined(d.detect(ai({ response_metadata: { finish_reason: "CONTENT_FILTER" } })))
  })

  it("test_other_finish_reasons_pass_through", () => {
    for (const reason of ["stop", "tool_calls", "length"]) {
      assert.isUndefined(d.detect(ai({ response_metadata: { finish_reason: reason } })), reason)
    }
  })

  it("test_missing_metadata_passes_through", () => {
    assert.isUndefined(d.detect(ai()))
  })

  it("test_non_string_finish_reason_passes_through", () => {
    assert.isUndefined(d.detect(ai({ response_metadata: { finish_reason: 42 } })))
    assert.isUndefined(d.detect(ai({ response_metadata: { finish_reason: { value: "content_filter" } } })))
  })

  it("test_falls_back_to_additional_kwargs", () => {
    assert.isDefined(d.detect(ai({ additional_kwargs: { finish_reason: "content_filter" } })))
  })

  it("test_configurable_extra_values", () => {
    const custom = S.openAiContentFilter(["content_filter", "sensitive", "violation"])
    for (const reason of ["sensitive", "violation", "content_filter"]) {
      assert.isDefined(custom.detect(ai({ response_metadata: { finish_reason: reason } })), reason)
    }
    // the default list does not know the gateway's own values
    assert.isUndefined(d.detect(ai({ response_metadata: { finish_reason: "sensitive" } })))
  })

  it("test_carries_azure_content_filter_results", () => {
    const filterResults = { hate: { filtered: true, severity: "high" } }
    const hit = d.detect(ai({
      response_metadata: { finish_reason: "content_filter", content_filter_results: filterResults }
    }))
    assert.deepStrictEqual(hit?.extras, { content_filter_results: filterResults })
  })
})

describe("test_safety_termination_detectors: TestAnthropicRefusalDetector", () => {
  const d = S.anthropicRefusal()

  it("test_default_matches_refusal", () => {
    const hit = d.detect(ai({ response_metadata: { stop_reason: "refusal" } }))
    assert.strictEqual(hit?.detector, "anthropic_refusal")
    assert.strictEqual(hit?.reason_field, "stop_reason")
    assert.strictEqual(hit?.reason_value, "refusal")
  })

  it("test_other_stop_reasons_pass_through", () => {
    for (const reason of ["end_turn", "tool_use", "max_tokens"]) {
      assert.isUndefined(d.detect(ai({ response_metadata: { stop_reason: reason } })), reason)
    }
  })

  it("test_anthropic_does_not_steal_finish_reason", () => {
    assert.isUndefined(d.detect(ai({ response_metadata: { finish_reason: "content_filter" } })))
  })
})

describe("test_safety_termination_detectors: TestGeminiSafetyDetector", () => {
  const d = S.geminiSafety()

  it("test_default_set_covers_documented_reasons", () => {
    for (const reason of [
      "SAFETY",
      "BLOCKLIST",
      "PROHIBITED_CONTENT",
      "SPII",
      "RECITATION",
      "IMAGE_SAFETY",
      "IMAGE_PROHIBITED_CONTENT",
      "IMAGE_RECITATION"
    ]) {
      assert.strictEqual(d.detect(ai({ response_metadata: { finish_reason: reason } }))?.reason_value, reason)
    }
  })

  it("test_normal_termination_passes_through", () => {
    for (const reason of [
      "STOP",
      "MAX_TOKENS",
      "LANGUAGE",
      "NO_IMAGE",
      "OTHER",
      "IMAGE_OTHER",
      "MALFORMED_FUNCTION_CALL",
      "UNEXPECTED_TOOL_CALL",
      "FINISH_REASON_UNSPECIFIED"
    ]) {
      assert.isUndefined(d.detect(ai({ response_metadata: { finish_reason: reason } })), reason)
    }
  })

  it("test_carries_safety_ratings", () => {
    const ratings = [{ category: "HARM_CATEGORY_HARASSMENT", probability: "HIGH" }]
    const hit = d.detect(ai({ response_metadata: { finish_reason: "SAFETY", safety_ratings: ratings } }))
    assert.deepStrictEqual(hit?.extras, { safety_ratings: ratings })
  })
})

describe("test_safety_termination_detectors: TestDefaultDetectorSet", () => {
  it("test_default_set_returns_three_detectors", () => {
    assert.deepStrictEqual(
      new Set(S.defaultDetectors().map((d) => d.name)),
      new Set(["openai_compatible_content_filter", "anthropic_refusal", "gemini_safety"])
    )
  })

  it("test_default_set_returns_fresh_list", () => {
    const first = S.defaultDetectors() as Array<S.Detector>
    first.length = 0
    assert.strictEqual(S.defaultDetectors().length, 3)
    // and the set still fires on a refusal
    assert.isDefined(S.detect(ai({ response_metadata: { stop_reason: "refusal" } }), S.defaultDetectors()))
  })
})
