/**
 * DeerFlow's `test_tool_result_meta.py`, case by case, against the `deerflow_tool_meta` Antler's ToolErrorHandling
 * stamps on every tool result (ToolProgress reads it to tell a stalled search from progress). Each table row is one
 * of DeerFlow's cases with the classification it pins.
 */
import { assert, describe, it } from "@effect/vitest"
import * as ToolErrorHandling from "../../src/middleware/ToolErrorHandling.js"
import * as M from "../../src/state/Message.js"

type Meta = ToolErrorHandling.ToolMeta

const message = (content: string, status: "success" | "error" = "success", kwargs: Record<string, unknown> = {}) =>
  M.tool(content, "tc-1", { name: "test_tool", status, additional_kwargs: kwargs })

const metaOf = (content: string, status: "success" | "error" = "success"): Meta =>
  ToolErrorHandling.normalize(message(content, status)).additional_kwargs?.[ToolErrorHandling.TOOL_META_KEY] as Meta

describe("test_tool_result_meta.py", () => {
  it("an already stamped result keeps its metadata", () => {
    const existing = { status: "success", source: "custom" }
    const stamped = message("hello", "success", { [ToolErrorHandling.TOOL_META_KEY]: existing })
    assert.strictEqual(ToolErrorHandling.normalize(stamped), stamped)
  })

  it("`Error:` results are classified by keyword, from the tool's return", () => {
    const cases: ReadonlyArray<readonly [string, string]> = [
      ["Error: 401 unauthorized", "auth"],
      ["Error: permission denied for path", "permission"],
      ["Error: 429 rate limit exceeded", "rate_limited"],
      ["Error: connection timeout", "transient"],
      ["Error: tool not configured", "config"],
      ["Error: no results found for query", "no_results"],
      ["Error: file not found", "not_found"],
      ["Error: internal error 500", "internal"],
      ["Error: something completely unexpected happened", "unknown"],
      // status codes count as whole words only
      ["Error: HTTP 500 Internal Server Error", "internal"],
      ["Error: returned status 500", "internal"],
      ["Error: 401 Unauthorized", "auth"],
      ["Error: 404 Not Found", "not_found"],
      ["Error: took 500ms to respond", "unknown"],
      ["Error: query returned 4010 rows", "unknown"],
      ["Error: batch 401A failed", "unknown"],
      ["Error: response contained 5000 items", "unknown"]
    ]
    for (const [content, type] of cases) {
      const meta = metaOf(content, "error")
      assert.deepStrictEqual([meta.status, meta.error_type, meta.source], ["error", type, "tool_return"], content)
    }
  })

  it("what each class tells the model to do next", () => {
    const next = (content: string) => {
      const meta = metaOf(content, "error")
      return [meta.error_type, meta.recoverable_by_model, meta.recommended_next_action]
    }
    assert.deepStrictEqual(next("Error: invalid api key"), ["auth", false, "stop"])
    // a missing key is configuration, not authentication
    assert.deepStrictEqual(next("Error: no api key configured"), ["config", false, "stop"])
    assert.deepStrictEqual(next("Error: rate limited"), ["rate_limited", false, "summarize"])
    assert.deepStrictEqual(next("Error: no results found"), ["no_results", true, "rewrite_query"])
  })

  it("an error status without `Error:` is classified from its text, or from a JSON object's error field only", () => {
    const type = (content: string) => {
      const meta = metaOf(content, "error")
      assert.deepStrictEqual([meta.status, meta.source], ["error", "tool_return"], content)
      return meta.error_type
    }
    assert.strictEqual(type("ConnectionError: connection refused"), "transient")
    assert.strictEqual(type("timeout occurred"), "transient")
    assert.strictEqual(type("connection refused: remote host unreachable"), "transient")
    assert.strictEqual(type(`{"error": "api limit exceeded", "query": "connection test timeout"}`), "unknown")
    assert.strictEqual(type(`{"message": "connection refused"}`), "unknown")
    assert.strictEqual(type(`{"user_id": 401, "action": "login"}`), "unknown")
    assert.notStrictEqual(metaOf(`{"user_id": 401, "action": "login"}`, "error").recommended_next_action, "stop")
    // a structured error field is read as JSON, not as a language's repr of it
    assert.strictEqual(type(JSON.stringify({ error: [{ loc: ["body"], msg: "missing required field" }] })), "config")
  })

  it("a successful status whose JSON carries an error field is an error; a 'no error' value is not", () => {
    const meta = (content: string) => metaOf(content, "success")
    assert.deepStrictEqual(
      [meta(`{"error": "BRAVE_SEARCH_API_KEY is not configured", "query": "test"}`).error_type,
        meta(`{"error": "BRAVE_SEARCH_API_KEY is not configured", "query": "test"}`).source],
      ["config", "tool_return"]
    )
    const noResults = meta(`{"error": "No results found", "query": "test"}`)
    assert.deepStrictEqual([noResults.status, noResults.error_type, noResults.recoverable_by_model], [
      "error",
      "no_results",
      true
    ])
    assert.strictEqual(meta(`  {"error": "No results found", "query": "test"}`).error_type, "no_results")
    assert.strictEqual(meta(`{"error": 404, "query": "test"}`).error_type, "not_found")
    const bare = meta(`{"error": true, "query": "test"}`)
    assert.deepStrictEqual(
      [bare.status, bare.error_type, bare.recoverable_by_model, bare.recommended_next_action],
      ["error", "unknown", true, "try_alternative"]
    )
    const notErrors = [`{"error": null, "query": "test"}`, `{"error": 0}`, `{"error": false}`, `{"error": "broken json`]
    for (const none of notErrors) {
      assert.notStrictEqual(meta(none).status, "error", none)
    }
    assert.strictEqual(meta(`{"results": [{"title": "page one"}], "total": 1}`).status, "success")
    for (const value of ["none", "None", "NONE", "null", "Null", "false", "False", "no", "ok", "success", "n/a", ""]) {
      const content = JSON.stringify({ error: value, results: ["item1", "item2", "item3"] })
      assert.notStrictEqual(meta(content).status, "error", content)
    }
  })

  it("partial results and 'no results' bodies are partial_success (rewrite the query); a terse OK is success", () => {
    for (
      const content of [
        "no results found",
        "No Content Found here",
        "no images found for query",
        "Here are some partial results available from the search.",
        "Here are some limited results returned from the search.",
        "Here are some truncated output from the search.",
        "Here are some results may be incomplete from the search."
      ]
    ) {
      const meta = metaOf(content)
      assert.deepStrictEqual([meta.status, meta.recommended_next_action], ["partial_success", "rewrite_query"], content)
    }
    for (const content of ["Ok.", ""]) {
      const meta = metaOf(content)
      assert.deepStrictEqual([meta.status, meta.source], ["success", "content_analysis"], content)
    }
    assert.deepStrictEqual(metaOf("A".repeat(200)), {
      status: "success",
      error_type: null,
      recoverable_by_model: true,
      recommended_next_action: "continue",
      source: "content_analysis"
    })
  })

  it("a tool that failed is classified from its exception, not from what its message says", () => {
    const failed = (error: unknown) => {
      const result = ToolErrorHandling.failureResult({ id: "tc-1", name: "web_search", args: {} }, error)
      return result.message.additional_kwargs?.[ToolErrorHandling.TOOL_META_KEY] as Meta
    }
    const refused = Object.assign(new Error("connection refused"), { name: "ConnectionError" })
    assert.deepStrictEqual([failed(refused).source, failed(refused).error_type], ["exception", "transient"])
    const denied = Object.assign(new Error("access denied"), { name: "PermissionError" })
    assert.strictEqual(failed(denied).error_type, "permission")
  })
})
