/**
 * An MCP task's event told without a notification run (`antler run` showed it: `Notifications.told`), on SQLite and
 * PostgreSQL: the event is delivered and no process takes it to tell again; only its user's task, only the event
 * shown (a newer one is still told), and not while a process is telling it. PostgreSQL is skipped, saying why, when
 * there is none.
 */
import { afterAll, assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Path from "node:path"
import type { Snapshot } from "../../../src/layers/mcp/TaskDriver.js"
import * as PgRecords from "../../../src/programs/gateway/mcptasks/PgRecords.js"
import type * as Records from "../../../src/programs/gateway/mcptasks/Records.js"
import * as SqliteRecords from "../../../src/programs/gateway/mcptasks/SqliteRecords.js"
import * as McpTasks from "../../../src/services/McpTasks.js"
import { NOW, oneOf, snapshot, taskRecord } from "../../support/mcpTaskRecords.js"
import * as Postgres from "../../support/postgres.js"
import { tempDir } from "./support.js"

const pg = await Postgres.start()
if ("skip" in pg) console.warn(`[MCP task told on PostgreSQL] skipped: ${pg.skip}`)
afterAll(async () => {
  if ("stop" in pg) await pg.stop()
})

const LEASE = 60_000
const T = (k: number) => NOW + k * 10 * LEASE
const run = <A, E>(effect: Effect.Effect<A, E>) => Effect.runPromise(effect)

/** Task `id` of alice's, created and polled once with each of `answers` (at T(1), T(2)...). */
const polled = async (store: Records.Service, id: string, answers: ReadonlyArray<Snapshot>) => {
  await run(store.create(taskRecord(id, { thread_id: `thread-${id}` })))
  for (const [i, answer] of answers.entries()) {
    const at = T(i + 1)
    const claimed = (await run(store.claimDue(at, "poller", LEASE, 8))).find((task) => task.id === id)!
    const next = McpTasks.ACTIVE.includes(answer.status) ? at + 1 : null
    assert.isTrue(await run(store.applySnapshot(claimed, "poller", answer, next, at)))
  }
  return Option.getOrThrow(await run(store.get(id, "alice")))
}

const laws = (open: () => Promise<readonly [Records.Service, () => Promise<void>]>) => {
  it("deliver the event shown, which no process then takes; another user's task, a newer event stay", async () => {
    const [store, close] = await open()
    try {
      const done = await polled(store, "told-1", [snapshot({ result: "ok" })])
      assert.deepStrictEqual([done.notification_status, done.event_version, done.notified_version], ["pending", 1, 0])
      assert.isFalse(await run(store.notifications.told("told-1", "bob", 1, T(5))))
      assert.isTrue(await run(store.notifications.told("told-1", "alice", 1, T(5))))
      const told = Option.getOrThrow(await run(store.get("told-1", "alice")))
      assert.deepStrictEqual([told.notification_status, told.notified_version], ["delivered", 1])
      assert.deepStrictEqual(await run(store.notifications.claim(T(6), "gateway", LEASE, 8, 3)), [])
      assert.isFalse(await run(store.notifications.told("told-1", "alice", 1, T(6))))

      // shown at its first question, asked another since: the newer one is still told
      const question = (text: string) => snapshot({ status: "input_required", input_required: { question: text } })
      const asked = await polled(store, "told-2", [question("Year?"), question("Month?")])
      assert.strictEqual(asked.event_version, 2)
      assert.isFalse(await run(store.notifications.told("told-2", "alice", 1, T(5))))
      const [taken] = await run(store.notifications.claim(T(6), "gateway", LEASE, 8, 3))
      assert.deepStrictEqual((taken!.dispatch_event as any).input_required, { question: "Month?" })
      // and while a process tells it, it is that process's to deliver
      assert.isFalse(await run(store.notifications.told("told-2", "alice", 2, T(6))))
      assert.strictEqual(Option.getOrThrow(await run(store.get("told-2", "alice"))).notification_status, "claimed")
    } finally {
      await close()
    }
  }, 120_000)
}

describe("an MCP task's event told by antler run, on SQLite", () => {
  laws(() => oneOf(() => SqliteRecords.make(Path.join(tempDir("antler-mcp-told-"), "antler.sqlite"))))
})

describe.skipIf("skip" in pg)("an MCP task's event told by antler run, on PostgreSQL", () => {
  laws(async () => {
    const url = await (pg as Postgres.Postgres).createDatabase()
    return oneOf(() => PgRecords.make(url))
  })
})
