import { assert, describe, it } from "@effect/vitest"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as FastCheck from "effect/FastCheck"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import * as ToolErrorHandling from "../../src/middleware/ToolErrorHandling.js"
import { AppConfigService, defaults } from "../../src/services/AppConfig.js"
import * as Tool from "../../src/services/Tool.js"
import { Interrupt, ToolError } from "../../src/services/ToolService.js"
import type { ToolCall } from "../../src/state/Message.js"
import * as M from "../../src/state/Message.js"
import * as H from "../support/harness.js"

const call = (name: string, args: Record<string, unknown> = {}, id = "call-1"): ToolCall => ({ id, name, args })

const metaOf = (message: M.Message) => message.additional_kwargs?.[ToolErrorHandling.TOOL_META_KEY] as
  | ToolErrorHandling.ToolMeta
  | undefined

/** A tool whose handler does what the test says. */
type Handler = (
  args: { readonly path?: string | undefined }
) => Effect.Effect<Tool.HandlerOutput, ToolError | Interrupt>

const tool = (name: string, handler: Handler) =>
  Tool.make({
    name,
    description: name,
    parameters: Schema.Struct({ path: Schema.optional(Schema.String) }),
    handler
  })

const runOne = (t: Tool.Tool, args: Record<string, unknown> = {}) =>
  Effect.gen(function*() {
    const outcome = yield* H.run({
      script: [{ toolCalls: [{ name: t.name, args, id: "call-1" }] }, "done"],
      tools: [t],
      middlewares: () => [ToolErrorHandling.layer()]
    })
    const result = outcome.state.messages.findLast((m): m is M.ToolMessage => m.type === "tool")
    return { outcome, result: result! }
  })

describe("ToolErrorHandling helpers", () => {
  // characters are code points, as DeerFlow's Python counts them: an emoji is one, and is never cut in half
  it.prop("truncateDetail keeps at most 500 characters: 497 and '...' when cut", [
    FastCheck.oneof(FastCheck.string({ maxLength: 1200 }), FastCheck.string({ unit: "binary", maxLength: 700 }))
  ], ([detail]) => {
    const cut = ToolErrorHandling.truncateDetail(detail)
    const chars = Array.from(detail)
    if (chars.length <= 500) assert.strictEqual(cut, detail)
    else {
      assert.strictEqual(Array.from(cut).length, 500)
      assert.strictEqual(cut, `${chars.slice(0, 497).join("")}...`)
    }
  })

  it("an error detail of emoji is cut by characters, whole emoji only", () => {
    const result = ToolErrorHandling.failureResult(call("web_search"), new Error("🔥".repeat(600)))
    const text = M.contentText(result.message.content)
    assert.include(text, `Error: ${"🔥".repeat(497)}...`)
    assert.notMatch(text, /[\uD800-\uDBFF](?![\uDC00-\uDFFF])/)
  })

  it("classifies error texts by keyword, first rule wins, status codes as whole numbers", () => {
    const type = (text: string) => ToolErrorHandling.classifyErrorText(text).error_type
    assert.strictEqual(type("HTTP 401 Unauthorized"), "auth")
    assert.strictEqual(type("rate limit exceeded"), "rate_limited")
    assert.strictEqual(type("connection refused"), "transient")
    assert.strictEqual(type("Tavily is not configured"), "config")
    assert.strictEqual(type("Permission denied: /etc"), "permission")
    assert.strictEqual(type("No results found for query"), "no_results")
    assert.strictEqual(type("No such file or directory"), "not_found")
    assert.strictEqual(type("Internal error 500"), "internal")
    assert.strictEqual(type("request took 500ms then broke"), "unknown")
    assert.deepStrictEqual(ToolErrorHandling.classifyErrorText("401 and not found"), {
      error_type: "auth",
      recoverable_by_model: false,
      recommended_next_action: "stop"
    })
  })

  it("reads the skill description from the YAML front matter", () => {
    assert.strictEqual(
      ToolErrorHandling.skillDescription(
        "---\nname: pdf\ndescription: >\n  Read and   fill\n  PDF forms.\n---\n# PDF\n"
      ),
      "Read and fill PDF forms."
    )
    assert.strictEqual(ToolErrorHandling.skillDescription("# no front matter"), "")
    assert.strictEqual(ToolErrorHandling.skillDescription("---\n: [broken\n---\n"), "")
    assert.strictEqual(ToolErrorHandling.skillDescription(`---\ndescription: ${"w ".repeat(400)}\n---\n`).length, 500)
    // DeerFlow's _parse_description keeps the first 500 characters as they are (no "..."), an emoji being one
    assert.strictEqual(
      ToolErrorHandling.skillDescription(`---\ndescription: a${"📄".repeat(600)}\n---\n`),
      `a${"📄".repeat(499)}`
    )
  })

  it("recognises skill files only under the skills root", () => {
    const skillPath = ToolErrorHandling.skillFilePath
    assert.strictEqual(skillPath("/mnt/skills/public/pdf/SKILL.md", "/mnt/skills"), "/mnt/skills/public/pdf/SKILL.md")
    assert.strictEqual(skillPath("/mnt/skills/a/../b/x/SKILL.md", "/mnt/skills/"), "/mnt/skills/b/x/SKILL.md")
    assert.isUndefined(ToolErrorHandling.skillFilePath("/mnt/skills/../user-data/SKILL.md", "/mnt/skills"))
    assert.isUndefined(ToolErrorHandling.skillFilePath("/mnt/skills-evil/x/SKILL.md", "/mnt/skills"))
    assert.isUndefined(ToolErrorHandling.skillFilePath("/mnt/skills/pdf/README.md", "/mnt/skills"))
  })
})

// DeerFlow's test_web_fetch_error_shell_meta.py (issue #4273): a web_fetch page whose title is nothing but an
// HTTP status line is an error page, not evidence; any other title, or any other tool, stays a success.
describe("ToolErrorHandling: web_fetch error pages", () => {
  const page = (content: string, name = "web_fetch") =>
    ToolErrorHandling.classifyResult(M.tool(content, "tc-1", { name, status: "success" }))
  const SUCCESS: ToolErrorHandling.ToolMeta = {
    status: "success",
    error_type: null,
    recoverable_by_model: true,
    recommended_next_action: "continue",
    source: "content_analysis"
  }
  const error = (
    error_type: string,
    recoverable_by_model: boolean,
    recommended_next_action: ToolErrorHandling.ToolMeta["recommended_next_action"]
  ): ToolErrorHandling.ToolMeta => ({
    status: "error",
    error_type,
    recoverable_by_model,
    recommended_next_action,
    source: "content_analysis"
  })

  it("a title that is only a status line classifies the page as an error of that kind", () => {
    const cases: ReadonlyArray<
      readonly [string, string, boolean, ToolErrorHandling.ToolMeta["recommended_next_action"]]
    > = [
      ["# 404 Not Found", "not_found", true, "rewrite_query"],
      ["# Page not found", "not_found", true, "rewrite_query"],
      ["# Not Found", "not_found", true, "rewrite_query"],
      ["# 404 - File or directory not found.", "not_found", true, "rewrite_query"],
      ["# HTTP Error 404 - Not Found", "not_found", true, "rewrite_query"],
      ["# 403 Forbidden", "permission", true, "try_alternative"],
      ["# Access Denied", "permission", true, "try_alternative"],
      ["# Permission denied", "permission", true, "try_alternative"],
      ["# 401 Unauthorized", "auth", false, "stop"],
      ["# 407 Proxy Authentication Required", "auth", false, "stop"],
      ["# 429 Too Many Requests", "rate_limited", false, "summarize"],
      ["# 500 Internal Server Error", "internal", false, "stop"],
      ["# 501 Not Implemented", "internal", false, "stop"],
      ["# 502 Bad Gateway", "transient", false, "try_alternative"],
      ["# 503 Service Unavailable", "transient", false, "try_alternative"],
      ["# 503 Service Temporarily Unavailable", "transient", false, "try_alternative"],
      ["# 504 Gateway Timeout", "transient", false, "try_alternative"]
    ]
    for (const [title, type, recoverable, next] of cases) {
      assert.deepStrictEqual(page(`${title}\n\n---\n\nnginx/1.24.0`), error(type, recoverable, next), title)
    }
    const apache = "# 404 Not Found\n\nThe requested URL was not found on this server.\n\n---\n\nApache/2.4.58"
    assert.strictEqual(page(apache).error_type, "not_found")
    // Antler's own web_fetch writes the title, then the URL
    assert.deepStrictEqual(
      page("# Page not found\n\nURL: https://example.org/x\n\nSorry, we couldn't find that page.\n"),
      error("not_found", true, "rewrite_query")
    )
  })

  it("documents that only mention a status, and other tools, stay successful", () => {
    const body = "Rice is a staple for most of the planet, and great rice is almost always technique."
    for (
      const content of [
        `# 404 Ways to Cook Rice\n\n${body}`,
        "# 500 Startup Ideas Worth Stealing",
        "# 403",
        "404",
        `# Not Found: a short history of the 404\n\n${body}`,
        "# The Page Not Found Problem",
        "# Forbidden Planet",
        "# Gone",
        "# HTTP Status Codes\n\nNot Found\n\nForbidden\n\nToo Many Requests",
        "# Untitled",
        "# Status\n\nAll systems operational.",
        "OK",
        "",
        "   \n\n  "
      ]
    ) assert.deepStrictEqual(page(content), SUCCESS, content)
    for (const name of ["read_file", "bash", "grep", "web_search"]) {
      for (const content of ["# 404 Not Found", "Access denied", "Not Found", "Too Many Requests"]) {
        assert.deepStrictEqual(page(content, name), SUCCESS, `${name}: ${content}`)
      }
    }
    // the partial-results path still wins over the title rule
    assert.strictEqual(page("No results found").status, "partial_success")
  })
})

describe("ToolErrorHandling middleware", () => {
  it.effect("a ToolError becomes an error result naming the tool, the error class and the detail", () =>
    Effect.gen(function*() {
      const failing = tool("web_fetch", () =>
        Effect.fail(
          new ToolError({
            tool: "web_fetch",
            toolCallId: "call-1",
            errorType: "TimeoutError",
            message: " timed out after 30s "
          })
        ))
      const { outcome, result } = yield* runOne(failing)
      assert.strictEqual(result.status, "error")
      assert.strictEqual(result.name, "web_fetch")
      assert.strictEqual(result.tool_call_id, "call-1")
      assert.strictEqual(
        M.text(result),
        "Error: Tool 'web_fetch' failed with TimeoutError: timed out after 30s. " +
          "Continue with available context, or choose an alternative tool."
      )
      assert.deepStrictEqual(metaOf(result), {
        status: "error",
        error_type: "transient",
        recoverable_by_model: false,
        recommended_next_action: "try_alternative",
        source: "exception"
      })
      // The run goes on: the model reads the error and answers.
      assert.strictEqual(outcome.end.status, "success")
      assert.strictEqual(outcome.requests.length, 2)
    }).pipe(H.withStore))

  it.effect("a long detail is cut at 500 characters (497 + '...')", () =>
    Effect.gen(function*() {
      const detail = "x".repeat(600)
      const failing = tool("grep", () =>
        Effect.fail(new ToolError({ tool: "grep", toolCallId: "call-1", errorType: "GrepError", message: detail })))
      const { result } = yield* runOne(failing)
      assert.include(M.text(result), `failed with GrepError: ${"x".repeat(497)}.... `)
      assert.notInclude(M.text(result), "x".repeat(498))
    }).pipe(H.withStore))

  it.effect("a defect (a bug in a tool) becomes an error result too", () =>
    Effect.gen(function*() {
      const buggy = tool("ls", () => Effect.die(new TypeError("Cannot read properties of undefined (reading 'x')")))
      const { result } = yield* runOne(buggy)
      assert.match(M.text(result), /^Error: Tool 'ls' failed with TypeError: Cannot read properties of undefined/)
      assert.strictEqual(metaOf(result)?.source, "exception")
      const empty = tool("ls", () => Effect.die(new RangeError("")))
      const { result: second } = yield* runOne(empty)
      assert.match(M.text(second), /failed with RangeError: RangeError\./)
    }).pipe(H.withStore))

  it.effect("a failing task gets the subagent failure text and a terminal status", () =>
    Effect.gen(function*() {
      const HINT = "Continue with available context, or choose an alternative tool."
      const failing = (errorType: string, message: string) =>
        tool("task", () => Effect.fail(new ToolError({ tool: "task", toolCallId: "call-1", errorType, message })))
      const { result } = yield* runOne(failing("RuntimeError", "network down"))
      assert.strictEqual(result.status, "error")
      assert.strictEqual(M.text(result), `Task failed. Error: RuntimeError: network down. ${HINT}`)
      assert.strictEqual(result.additional_kwargs?.subagent_status, "failed")
      assert.strictEqual(result.additional_kwargs?.subagent_error, "RuntimeError: network down")
      // a long error: the metadata carries the detail the model reads, cut at 500 characters
      const long = `${"head ".repeat(300)}${"tail ".repeat(300)}`
      const { result: cut } = yield* runOne(failing("SubagentError", long))
      const detail = `SubagentError: ${long.trim().slice(0, 497)}...`
      assert.strictEqual(M.text(cut), `Task failed. Error: ${detail} ${HINT}`)
      assert.strictEqual(cut.additional_kwargs?.subagent_error, detail)
    }).pipe(H.withStore))

  it.effect("an Interrupt (a clarification) passes through: the run ends interrupted with its payload", () =>
    Effect.gen(function*() {
      const ask = tool("ask_clarification", () =>
        Effect.fail(new Interrupt({
          reason: "clarification",
          payload: { question: "Which file?" },
          result: { message: M.tool("Which file?", "call-1", { name: "ask_clarification" }) }
        })))
      const { outcome, result } = yield* runOne(ask)
      assert.strictEqual(outcome.end.status, "interrupted")
      assert.deepStrictEqual(outcome.end.interrupt, { question: "Which file?" })
      assert.strictEqual(M.text(result), "Which file?")
      assert.isUndefined(metaOf(result))
    }).pipe(H.withStore))

  it.effect("fiber interruption passes through untouched", () =>
    Effect.gen(function*() {
      const wrap = ToolErrorHandling.wrap()
      const exit = yield* Effect.exit(wrap(call("bash"), () => Effect.interrupt))
      assert.isTrue(Exit.isFailure(exit) && Cause.isInterruptedOnly(exit.cause))
    }))

  it.effect("successful results get deerflow_tool_meta, classified from their content", () =>
    Effect.gen(function*() {
      const wrap = ToolErrorHandling.wrap()
      const stamp = (message: M.ToolMessage) =>
        Effect.map(wrap(call("web_search"), () => Effect.succeed({ message })), (r) => metaOf(r.message))
      assert.deepStrictEqual(yield* stamp(M.tool("3 results: ...", "c")), {
        status: "success",
        error_type: null,
        recoverable_by_model: true,
        recommended_next_action: "continue",
        source: "content_analysis"
      })
      assert.deepStrictEqual(yield* stamp(M.tool("Error: 403 Forbidden", "c", { status: "error" })), {
        status: "error",
        error_type: "auth",
        recoverable_by_model: false,
        recommended_next_action: "stop",
        source: "tool_return"
      })
      assert.strictEqual((yield* stamp(M.tool("Error: file not found", "c")))?.error_type, "not_found")
      assert.deepStrictEqual((yield* stamp(M.tool("Output truncated at 20000 chars", "c")))?.status, "partial_success")
      const jsonError = M.tool("{\"error\": \"rate limit hit\", \"query\": \"401\"}", "c")
      assert.strictEqual((yield* stamp(jsonError))?.error_type, "rate_limited")
      assert.strictEqual((yield* stamp(M.tool("{\"error\": \"none\", \"results\": []}", "c")))?.status, "success")
      // a falsy error field is none, as Python's truthiness reads it: an empty list or object too
      for (const empty of ["[]", "{}", "0.0", "false", "null", "\"\""]) {
        assert.strictEqual((yield* stamp(M.tool(`{"error": ${empty}, "results": [1]}`, "c")))?.status, "success", empty)
      }
      assert.strictEqual((yield* stamp(M.tool("{\"error\": [\"quota exceeded\"]}", "c")))?.status, "error")
      assert.strictEqual((yield* stamp(M.tool("{\"user_id\": 401}", "c", { status: "error" })))?.error_type, "unknown")
      // A meta the tool set itself is kept, and the message is returned as is.
      const own = M.tool("x", "c", {
        additional_kwargs: { deerflow_tool_meta: { status: "success", source: "tool_return" } }
      })
      const result = yield* wrap(call("t"), () => Effect.succeed({ message: own }))
      assert.strictEqual(result.message, own)
    }))

  it.effect("a successful read of /mnt/skills/**/SKILL.md is stamped with the skill's path and description", () =>
    Effect.gen(function*() {
      const skill = "---\nname: pdf-forms\ndescription: Fill PDF forms\n  from JSON data.\n---\n\n# PDF forms\n"
      const readFile = tool("read_file", ({ path }) => Effect.succeed(path?.endsWith("SKILL.md") ? skill : "plain"))
      const { result } = yield* runOne(readFile, { path: "/mnt/skills/public/pdf-forms/SKILL.md" })
      assert.deepStrictEqual(result.additional_kwargs?.skill_context_entry, {
        path: "/mnt/skills/public/pdf-forms/SKILL.md",
        description: "Fill PDF forms from JSON data."
      })
      assert.strictEqual(metaOf(result)?.status, "success")

      const other = yield* runOne(readFile, { path: "/mnt/user-data/workspace/SKILL.md" })
      assert.isUndefined(other.result.additional_kwargs?.skill_context_entry)
      const failed = tool("read_file", () => Effect.succeed("Error: File not found: /mnt/skills/x/SKILL.md"))
      const missing = yield* runOne(failed, { path: "/mnt/skills/x/SKILL.md" })
      assert.isUndefined(missing.result.additional_kwargs?.skill_context_entry)
      const notReader = tool("write_file", () => Effect.succeed(skill))
      const written = yield* runOne(notReader, { path: "/mnt/skills/public/pdf-forms/SKILL.md" })
      assert.isUndefined(written.result.additional_kwargs?.skill_context_entry)
    }).pipe(H.withStore))

  it.effect("reads the skill-read tool names and the skills root from config", () =>
    Effect.gen(function*() {
      const config = defaults()
      const custom = {
        ...config,
        skills: { ...config.skills, container_path: "/opt/skills" },
        summarization: { ...config.summarization, skill_file_read_tool_names: ["view_file"] }
      }
      const viewFile = tool("view_file", () => Effect.succeed("---\ndescription: custom root\n---\n"))
      const outcome = yield* H.run({
        script: [{ toolCalls: [{ name: "view_file", args: { path: "/opt/skills/a/SKILL.md" } }] }, "done"],
        tools: [viewFile],
        middlewares: () => [ToolErrorHandling.layerFromConfig()]
      }).pipe(
        Effect.provide(
          Layer.succeed(AppConfigService, { config: custom, source: undefined, ignored: [], home: "/tmp" })
        )
      )
      const result = outcome.state.messages.find((m) => m.type === "tool")!
      assert.deepStrictEqual(result.additional_kwargs?.skill_context_entry, {
        path: "/opt/skills/a/SKILL.md",
        description: "custom root"
      })
    }).pipe(H.withStore))
})
