/**
 * A process that stops while it polls a task (a Ctrl-C of `antler run`, `antler serve` stopping) gives the task back
 * at once: the next process polls it now, not after the claim's lease (`lease_seconds`, two minutes by default). Over
 * a real SQLite store; the task's MCP server never answers the poll, so the poll is under way when the poller stops.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Schema from "effect/Schema"
import * as Path from "node:path"
import * as Runtime from "../../../src/programs/gateway/mcptasks/Runtime.js"
import * as SqliteRecords from "../../../src/programs/gateway/mcptasks/SqliteRecords.js"
import { McpTasksConfig } from "../../../src/services/config/McpTasks.js"
import type { Mcp } from "../../../src/services/Mcp.js"
import { oneOf, taskRecord } from "../../support/mcpTaskRecords.js"
import { tempDir } from "./support.js"

describe("an MCP task poll cut short by its process stopping", () => {
  it.live("gives the task back: another process polls it at once", () =>
    Effect.gen(function*() {
      const file = Path.join(tempDir("antler-mcp-unclaim-"), "tasks.db")
      const [records, close] = yield* Effect.promise(() => oneOf(() => SqliteRecords.make(file)))
      yield* Effect.addFinalizer(() => Effect.promise(close))
      yield* records.create(taskRecord("task-1", { next_poll_at: Date.now() - 1_000 }))
      const asked = yield* Deferred.make<void>()
      // (the server never answers: the poll is under way, the task claimed, when the poller stops)
      const mcp = {
        call: () => Effect.zipRight(Deferred.succeed(asked, undefined), Effect.never)
      } as unknown as Mcp["Type"]
      const config = Schema.decodeUnknownSync(McpTasksConfig)({ enabled: true, lease_seconds: 120 })
      const runtime = yield* Runtime.make(config, records, mcp)
      const polling = yield* Effect.fork(runtime.pass)
      yield* Deferred.await(asked)
      const claimed = yield* records.claimDue(Date.now(), "other", 60_000, 8)
      assert.lengthOf(claimed, 0, "the task is claimed while its poll is under way")
      yield* Fiber.interrupt(polling)
      const taken = yield* records.claimDue(Date.now(), "other", 60_000, 8)
      assert.deepStrictEqual(taken.map((task) => task.id), ["task-1"])
    }).pipe(Effect.scoped), 60_000)
})
