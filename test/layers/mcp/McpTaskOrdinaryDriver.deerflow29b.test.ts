/**
 * DeerFlow's `test_mcp_task_ordinary_driver.py` (and the snapshot cases of `test_mcp_task_models.py`): the ordinary
 * driver reads only a task tool's `structuredContent`, maps the protocol's states to a record's, keeps a failed
 * call's first text block (500 characters) as its detail, and refuses what breaks the contract as permanent.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as TaskDriver from "../../../src/layers/mcp/TaskDriver.js"
import type { Mcp, McpResult } from "../../../src/services/Mcp.js"

const DRIVER_DATA = { submit_tool: "submit_report", status_tool: "get_report_status", cancel_tool: "cancel_report" }
const SCOPE = { userId: "user-1", threadId: "thread-1" }
const REF: TaskDriver.TaskRef = { server: "reports", remoteTaskId: "remote-1", driverData: DRIVER_DATA, scope: SCOPE }

const result = (structuredContent: unknown, text = "ignored", isError = false): McpResult => ({
  content: [{ type: "text", text }],
  isError,
  ...(structuredContent === undefined ? {} : { structuredContent })
})

/** A server answering each call with the next of `results`, recording the calls. */
const caller = (...results: Array<McpResult>) => {
  const calls: Array<{ server: string; tool: string; args: unknown; scope: unknown }> = []
  const mcp = {
    call: (server: string, tool: string, args: unknown, scope?: unknown) =>
      Effect.sync(() => {
        calls.push({ server, tool, args, scope })
        return results.shift()!
      })
  } as unknown as Mcp["Type"]
  return { mcp, calls }
}

const failure = <A>(effect: Effect.Effect<A, TaskDriver.DriverError>) =>
  Effect.flip(effect).pipe(Effect.map((error) => ({ permanent: error.permanent, message: error.message })))

describe("test_mcp_task_ordinary_driver", () => {
  it.effect("test_submit_uses_structured_content_and_keeps_remote_id_out_of_driver_data", () =>
    Effect.gen(function*() {
      const { calls, mcp } = caller(result({ task_id: "remote-1", status: "running" }, "{\"task_id\":\"wrong\"}"))
      const remote = yield* TaskDriver.submit(mcp, "reports", DRIVER_DATA, { topic: "MCP" }, SCOPE)
      assert.strictEqual(remote, "remote-1")
      assert.deepStrictEqual(calls, [{ server: "reports", tool: "submit_report", args: { topic: "MCP" }, scope: SCOPE }])
      assert.notProperty(DRIVER_DATA, "remote_task_id")
    }))

  it.effect("test_submit_rejects_missing_or_invalid_structured_content", () =>
    Effect.gen(function*() {
      for (
        const [content, match] of [
          [undefined, "structuredContent"],
          [{ status: "running" }, "task_id"],
          [{ task_id: "remote-1", status: "queued" }, "status"]
        ] as const
      ) {
        const { mcp } = caller(result(content, "{\"task_id\":\"remote-from-text\"}"))
        const error = yield* failure(TaskDriver.submit(mcp, "reports", DRIVER_DATA, {}, SCOPE))
        assert.isTrue(error.permanent, error.message)
        assert.include(error.message, match)
        assert.notInclude(error.message, "remote-from-text")
      }
    }))

  it.effect("test_tool_errors_preserve_only_a_bounded_first_text_detail", () =>
    Effect.gen(function*() {
      const detail = "remote service unavailable: " + "x".repeat(600)
      const failed = (): McpResult => ({
        content: [{ type: "text", text: detail }, { type: "text", text: "second block must not be included" }],
        isError: true
      })
      const cases = [
        ["submit_report", (mcp: Mcp["Type"]) => TaskDriver.submit(mcp, "reports", DRIVER_DATA, {}, SCOPE)],
        ["get_report_status", (mcp: Mcp["Type"]) => TaskDriver.status(mcp, REF)],
        ["cancel_report", (mcp: Mcp["Type"]) => TaskDriver.cancel(mcp, REF)]
      ] as const
      for (const [tool, run] of cases) {
        const error = yield* failure<unknown>(run(caller(failed()).mcp))
        assert.deepStrictEqual(error, {
          permanent: false,
          message: `MCP task tool '${tool}' returned an error: ${detail.slice(0, 500)}`
        })
      }
    }))

  it.effect("test_status_maps_all_protocol_states_and_preserves_artifact", () =>
    Effect.gen(function*() {
      const artifact = { uri: "s3://reports/1.json", mime_type: "application/json" }
      const { calls, mcp } = caller(
        result({ task_id: "remote-1", status: "running", poll_after_seconds: 7 }),
        result({ task_id: "remote-1", status: "completed", result: { report: "ready" }, result_artifact: artifact })
      )
      const running = yield* TaskDriver.status(mcp, REF)
      const completed = yield* TaskDriver.status(mcp, REF)
      assert.strictEqual(running.status, "working")
      assert.strictEqual(running.poll_after_seconds, 7)
      assert.strictEqual(completed.status, "completed")
      assert.deepStrictEqual(completed.result, { report: "ready" })
      assert.deepStrictEqual(completed.result_artifact, artifact)
      assert.deepStrictEqual(calls[0]!.args, { task_id: "remote-1" })
    }))

  it.effect("test_status_keeps_input_required_pollable", () =>
    Effect.gen(function*() {
      const { mcp } = caller(
        result({ task_id: "remote-1", status: "input_required", input_required: { prompt: "Approve deployment?" } })
      )
      const snapshot = yield* TaskDriver.status(mcp, REF)
      assert.strictEqual(snapshot.status, "input_required")
      assert.deepStrictEqual(snapshot.input_required, { prompt: "Approve deployment?" })
    }))

  it.effect("test_status_rejects_non_finite_poll_after_seconds (and test_mcp_task_models' non-positive ones)", () =>
    Effect.gen(function*() {
      for (const interval of [Infinity, NaN, 0, -1, -Infinity]) {
        const { mcp } = caller(result({ task_id: "remote-1", status: "running", poll_after_seconds: interval }))
        const error = yield* failure(TaskDriver.status(mcp, REF))
        assert.isTrue(error.permanent)
        assert.include(error.message, "poll_after_seconds", String(interval))
      }
      const { mcp } = caller(result({ task_id: "remote-1", status: "running", poll_after_seconds: 12.5 }))
      assert.strictEqual((yield* TaskDriver.status(mcp, REF)).poll_after_seconds, 12.5)
    }))

  it.effect("test_input_required_snapshot_requires_payload (test_mcp_task_models)", () =>
    Effect.gen(function*() {
      const { mcp } = caller(result({ task_id: "remote-1", status: "input_required" }))
      const error = yield* failure(TaskDriver.status(mcp, REF))
      assert.deepStrictEqual(error, {
        permanent: true,
        message: "Invalid structuredContent: input_required status requires input_required"
      })
    }))

  it.effect("test_status_turns_task_not_found_into_permanent_failure", () =>
    Effect.gen(function*() {
      const { mcp } = caller(
        result({ task_id: "remote-1", status: "running", error_code: "task_not_found", error: "expired" })
      )
      const snapshot = yield* TaskDriver.status(mcp, REF)
      assert.strictEqual(snapshot.status, "failed")
      assert.strictEqual(snapshot.error, "expired")
    }))

  it.effect("test_status_rejects_mismatched_remote_id_and_unknown_status", () =>
    Effect.gen(function*() {
      const { mcp } = caller(
        result({ task_id: "another-task", status: "running" }),
        result({ task_id: "remote-1", status: "paused" })
      )
      const mismatched = yield* failure(TaskDriver.status(mcp, REF))
      assert.isTrue(mismatched.permanent)
      assert.include(mismatched.message, "task_id does not match")
      const unknown = yield* failure(TaskDriver.status(mcp, REF))
      assert.isTrue(unknown.permanent)
      assert.include(unknown.message, "status")
    }))

  it.effect("test_cancel_is_idempotent_and_preserves_actual_terminal_status", () =>
    Effect.gen(function*() {
      for (const status of ["cancelled", "completed", "failed"] as const) {
        const { mcp } = caller(result({ task_id: "remote-1", status }))
        assert.strictEqual((yield* TaskDriver.cancel(mcp, REF)).status, status)
      }
    }))

  it.effect("test_submission_rejects_empty_remote_id (test_mcp_task_models): a blank task_id is refused", () =>
    Effect.gen(function*() {
      const { mcp } = caller(result({ task_id: "  ", status: "running" }))
      const error = yield* failure(TaskDriver.submit(mcp, "reports", DRIVER_DATA, {}, SCOPE))
      assert.isTrue(error.permanent, error.message)
      assert.include(error.message, "remote_task_id must not be empty")
    }))
})
