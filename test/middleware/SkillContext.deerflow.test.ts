/**
 * Mirrors DeerFlow's test_skill_context.py through a run: what the model reads with a file-read tool becomes a
 * loaded skill (`skill_context`, projected into later requests under "Active skills") only when it is a successful
 * read of a `SKILL.md` under the skills root. A path with `.` segments is kept normalised; a path escaping the root,
 * a skill's supporting file, a failed read (an error status, or the tool's `Error:` text), a write and a read of a
 * file outside the skills are not loads. The entry is a compact reference (name, path, description capped at 500
 * characters), never the skill's body, and the projection is a reminder to re-read the file, not the file.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as DurableContext from "../../src/middleware/DurableContext.js"
import * as ToolErrorHandling from "../../src/middleware/ToolErrorHandling.js"
import * as Tool from "../../src/services/Tool.js"
import { ToolError } from "../../src/services/ToolService.js"
import type { Message } from "../../src/state/Message.js"
import * as M from "../../src/state/Message.js"
import * as Harness from "../support/harness.js"

const BODY_SENTINEL = "ALWAYS_USE_PANDAS_SENTINEL"
const LONG = "x".repeat(2000)

const body = (description: string) =>
  `---\nname: data-analysis\ndescription: ${description}\n---\n# Data Analysis\nUse pandas. ${BODY_SENTINEL}\n`

/** A read tool over a few files: a missing SKILL.md answers DeerFlow's error text with a success status. */
const readFile = Tool.make({
  name: "read_file",
  description: "Read a file",
  parameters: Schema.Struct({ path: Schema.String }),
  handler: ({ path }, toolCall) => {
    if (path.endsWith("/missing/SKILL.md")) return Effect.succeed(`Error: File not found: ${path}`)
    if (path.endsWith("/broken/SKILL.md")) return Effect.fail(
        new ToolError({ tool: "read_file", toolCallId: toolCall.id, errorType: "PermissionError", message: "denied" })
      )
    if (path.endsWith("/long/SKILL.md")) return Effect.succeed(body(LONG))
    if (path.endsWith("SKILL.md")) return Effect.succeed(body("Analyze data with pandas and charts."))
    return Effect.succeed(`contents of ${path} ${BODY_SENTINEL}`)
  }
})

const writeFile = Tool.make({
  name: "write_file",
  description: "Write a file",
  parameters: Schema.Struct({ path: Schema.String, content: Schema.String }),
  handler: () => Effect.succeed("OK")
})

const call = (name: string, args: Record<string, string>) => ({ toolCalls: [{ name, args }] })

const dataOf = (messages: ReadonlyArray<Message>) => messages.find((m) => m.id === DurableContext.DATA_ID)

const run = (...steps: ReadonlyArray<{ toolCalls: ReadonlyArray<{ name: string; args: Record<string, string> }> }>) =>
  Harness.run({
    script: [...steps, "done"],
    tools: [readFile, writeFile],
    middlewares: () => [DurableContext.layer(), ToolErrorHandling.layer()]
  })

describe("loaded skills (DeerFlow's skill_context)", () => {
  // test_normalizes_dot_segments_under_skills_root, test_captures_skill_reference_with_description,
  // test_renders_reference_reminder_not_body
  it.effect("a SKILL.md read is kept as a compact reference, its path normalised, and projected as a reminder", () =>
    Effect.gen(function*() {
      const out = yield* run(call("read_file", { path: "/mnt/skills/public/./data-analysis/SKILL.md" }))
      assert.deepStrictEqual(out.state.skill_context.map(({ loaded_at: _, ...entry }) => entry), [{
        name: "data-analysis",
        path: "/mnt/skills/public/data-analysis/SKILL.md",
        description: "Analyze data with pandas and charts."
      }])
      assert.notInclude(JSON.stringify(out.state.skill_context), BODY_SENTINEL)
      const data = M.text(dataOf(out.requests.at(-1)!.messages)!)
      assert.include(data, "Active skills")
      assert.include(data.toLowerCase(), "re-read")
      assert.include(data, "data-analysis")
      assert.include(data, "Analyze data with pandas and charts.")
      assert.include(data, "/mnt/skills/public/data-analysis/SKILL.md")
      assert.notInclude(data, BODY_SENTINEL)
      assert.notInclude(data, "###")
    }).pipe(Harness.withStore))

  // test_description_is_capped_at_capture_time, test_render_caps_large_description
  it.effect("a long description is capped at 500 characters when captured, and the projection stays small", () =>
    Effect.gen(function*() {
      const out = yield* run(call("read_file", { path: "/mnt/skills/custom/long/SKILL.md" }))
      assert.strictEqual(out.state.skill_context.length, 1)
      assert.isAtMost(out.state.skill_context[0]!.description.length, 500)
      const line = M.text(dataOf(out.requests.at(-1)!.messages)!).split("\n").find((l) => l.startsWith("- long"))!
      assert.isBelow(line.length, 800)
    }).pipe(Harness.withStore))

  // test_rejects_traversal_that_escapes_skills_root, test_ignores_supporting_resources_under_skill_directory,
  // test_ignores_error_tool_messages, test_ignores_read_file_error_text_even_when_tool_status_is_success,
  // test_ignores_reads_outside_skills_root, test_ignores_non_read_tool_names
  it.effect("a read that escapes the root, a supporting file, a failed read, a write and other files load nothing", () =>
    Effect.gen(function*() {
      const out = yield* run(
        call("read_file", { path: "/mnt/skills/../user-data/workspace/SKILL.md" }),
        call("read_file", { path: "/mnt/skills/public/data-analysis/scripts/analyze.py" }),
        call("read_file", { path: "/mnt/skills/public/broken/SKILL.md" }),
        call("read_file", { path: "/mnt/skills/public/missing/SKILL.md" }),
        call("write_file", { path: "/mnt/skills/public/a/SKILL.md", content: body("written") }),
        call("read_file", { path: "/mnt/user-data/workspace/notes.md" })
      )
      assert.strictEqual(out.end.status, "success")
      assert.deepStrictEqual(out.state.skill_context, [])
      for (const request of out.requests) assert.isUndefined(dataOf(request.messages))
    }).pipe(Harness.withStore))

  // test_multiple_skills_each_captured
  it.effect("each skill read is captured, in the order read", () =>
    Effect.gen(function*() {
      const out = yield* run(
        call("read_file", { path: "/mnt/skills/public/a/SKILL.md" }),
        call("read_file", { path: "/mnt/skills/custom/b/SKILL.md" })
      )
      assert.deepStrictEqual(out.state.skill_context.map((s) => s.name), ["a", "b"])
    }).pipe(Harness.withStore))
})
