/**
 * DeerFlow's `mcp_tasks` section (config/mcp_tasks_config.py) and `task_toolsets` (McpTaskToolsetConfig; tests
 * test_mcp_task_config.py, test_mcp_task_toolset_config.py): its defaults, its bounds refused naming the key, and
 * a toolset refused when it is not one (a blank name, a key of its own, one raw tool in two roles).
 */
import { assert, describe, it } from "@effect/vitest"
import * as Either from "effect/Either"
import * as Schema from "effect/Schema"
import { McpTasksConfig } from "../../src/services/AppConfig.js"
import { McpServerConfig } from "../../src/services/Extensions.js"

const tasks = (value: unknown) => Schema.decodeUnknownEither(McpTasksConfig)(value)
const server = (toolsets: unknown) =>
  Schema.decodeUnknownEither(McpServerConfig)({ command: "node", task_toolsets: toolsets })
const toolset = { name: "Report", submit_tool: "start", status_tool: "status", cancel_tool: "cancel" }
const refusal = (decoded: Either.Either<unknown, { readonly message: string }>) =>
  Either.isLeft(decoded) ? decoded.left.message : assert.fail("decoded")

describe("mcp_tasks", () => {
  it("is off by default, with DeerFlow's defaults", () => {
    assert.deepStrictEqual(Either.getOrThrow(tasks({})), {
      enabled: false,
      poll_interval_seconds: 5,
      lease_seconds: 120,
      max_concurrent_polls: 8,
      max_poll_backoff_seconds: 300,
      input_required_poll_interval_seconds: 60,
      tracking_degraded_after_errors: 3,
      max_result_bytes: 65_536,
      result_preview_max_chars: 2_000,
      // (Antler's own bound: see Attack23McpStorm)
      max_notifications_per_task: 20
    })
  })

  it("refuses a value outside DeerFlow's bounds, naming the key", () => {
    const bounds: ReadonlyArray<readonly [string, number, number]> = [
      ["poll_interval_seconds", 1, 300],
      ["lease_seconds", 5, 3600],
      ["max_concurrent_polls", 1, 64],
      ["max_poll_backoff_seconds", 1, 3600],
      ["input_required_poll_interval_seconds", 5, 3600],
      ["tracking_degraded_after_errors", 1, 100],
      ["max_result_bytes", 1024, 10_485_760],
      ["result_preview_max_chars", 64, 100_000]
    ]
    for (const [key, low, high] of bounds) {
      assert.isTrue(Either.isRight(tasks({ [key]: low })), key)
      assert.isTrue(Either.isRight(tasks({ [key]: high })), key)
      assert.include(refusal(tasks({ [key]: low - 1 })), key)
      assert.include(refusal(tasks({ [key]: high + 1 })), key)
    }
    assert.include(refusal(tasks({ poll_interval_seconds: 1.5 })), "poll_interval_seconds")
  })
})

describe("task_toolsets", () => {
  it("are kept as given; none by default", () => {
    assert.deepStrictEqual(Either.getOrThrow(server([toolset])).task_toolsets, [toolset])
    assert.deepStrictEqual(Either.getOrThrow(Schema.decodeUnknownEither(McpServerConfig)({})).task_toolsets, [])
  })

  it("refuse a blank name, a key of their own, an empty tool name", () => {
    assert.include(refusal(server([{ ...toolset, name: "  " }])), "MCP task toolset name must not be empty")
    assert.include(refusal(server([{ ...toolset, poll: "x" }])), "is unexpected")
    assert.include(refusal(server([{ ...toolset, status_tool: "" }])), "status_tool")
    assert.include(refusal(server([{ ...toolset, name: "n".repeat(256) }])), "name")
  })

  it("refuse one raw tool in two roles, within a toolset or across two", () => {
    assert.include(
      refusal(server([{ ...toolset, cancel_tool: "status" }])),
      "MCP task tool 'status' must be unique across task_toolsets and roles; it is configured as both " +
        "Report.status_tool and Report.cancel_tool"
    )
    assert.include(
      refusal(server([toolset, { ...toolset, name: "Other", submit_tool: "other", status_tool: "start" }])),
      "configured as both Report.submit_tool and Other.status_tool"
    )
  })
})
