/**
 * What a run's admission reserves for its first step (`StorageQuota.firstStepBytes`) covers what the real stores
 * keep for it, however many messages the input has. Before, it reserved three times the messages' JSON and 4 KiB,
 * while the first checkpoint keeps each message with what the server adds to it (an id, a type): 74 bytes for the
 * smallest message a client may send (`{"content":""}`, 15 with its comma), 29 a message over the three copies, past
 * the 4 KiB at about 100 messages (100 kept 8625 bytes where 8599 were reserved; 1000 kept 75225 where 49099 were),
 * so a run admitted near a limit passed it with its first step. Now 64 bytes a message are reserved besides. Measured
 * in the bytes each store counts for the checkpoint (`octet_length` of what it keeps: the SQLite file, PostgreSQL's
 * table; skipped, saying why, without PostgreSQL); the model is SCRIPTED, the clients speak HTTP.
 */
import { afterAll, assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { createRequire } from "node:module"
import * as Path from "node:path"
import * as InputBounds from "../../../src/programs/gateway/InputBounds.js"
import * as StorageQuota from "../../../src/programs/gateway/StorageQuota.js"
import * as ThreadIds from "../../../src/programs/gateway/ThreadIds.js"
import * as Postgres from "../../support/postgres.js"
import * as Requests from "../../support/requests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const { ALICE } = Support

// the store's SQLite file, opened beside it (better-sqlite3, as its store opens it)
interface Database {
  readonly prepare: (sql: string) => { readonly get: (...params: ReadonlyArray<unknown>) => unknown }
  readonly close: () => void
}
const Database = createRequire(import.meta.url)("better-sqlite3") as new(
  filename: string,
  options?: { readonly readonly?: boolean }
) => Database
const KiB = 1024

const pg = await Postgres.start()
if ("skip" in pg) console.warn(`[StorageQuota26FirstStepMessages PostgreSQL] skipped: ${pg.skip}`)
afterAll(() => ("stop" in pg ? pg.stop() : undefined))

/** `count` of the smallest messages a client may send (a user's, its type and id left to the server). */
const conversation = (count: number) => Array.from({ length: count }, () => ({ content: "" }))

const SQLITE_FIRST = `SELECT octet_length(updates) AS bytes FROM checkpoints WHERE thread_id = ? ORDER BY seq LIMIT 1`
const PG_FIRST = (stored: string) =>
  `SELECT octet_length(updates) FROM antler_checkpoints WHERE thread_id = '${stored}' ORDER BY seq LIMIT 1`

const perBackend = (name: string, database: () => Promise<string | undefined | "sqlite">) =>
  describe(`${name}: the first step of an input of many small messages`, () => {
    const gateways: Array<TestGateway> = []
    afterAll(() => Promise.all(gateways.map((g) => g.stop())))

    it("keeps no more than its admission reserved, at any number of messages", async (c) => {
      const url = await database()
      if (url === undefined) return c.skip()
      const gateway = await Support.start({
        script: () => "ok",
        config: {
          ...(url === "sqlite" ? {} : { database: { url } }),
          gateway: { ...Support.twoUsers, quotas: { max_user_bytes: 0, max_thread_bytes_per_user: 1024 * KiB * KiB } }
        }
      })
      gateways.push(gateway)
      const alice = Requests.as(() => gateway, ALICE)
      const keptBy = (stored: string): number => {
        if (url !== "sqlite") return Number(Postgres.psql(url, PG_FIRST(stored)))
        const db = new Database(Path.join(gateway.home, "antler.sqlite"), { readonly: true })
        try {
          return (db.prepare(SQLITE_FIRST).get(stored) as { bytes: number }).bytes
        } finally {
          db.close()
        }
      }
      const measured: Array<string> = []
      for (const count of [1, 10, 100, 300, 1000]) {
        const threadId = (await alice("POST", "/threads", {})).json().thread_id as string
        const messages = conversation(count)
        const ran = await alice("POST", `/threads/${threadId}/runs/wait`, {
          assistant_id: "lead_agent",
          input: { messages }
        })
        assert.strictEqual(ran.status, 200, ran.text.slice(0, 300))
        const stored = Option.getOrThrow(await Effect.runPromise(ThreadIds.find(gateway.store, "alice", threadId)))
        const kept = keptBy(stored.thread_id)
        const sent = InputBounds.jsonBytes(messages)
        const reserved = StorageQuota.firstStepBytes(messages)
        measured.push(`${count}: ${kept} kept for ${sent} sent, ${reserved} reserved`)
        assert.isAtMost(kept, reserved, `${count} messages: ${measured.join("; ")}`)
      }
      // (measured: 75225 bytes kept for 1000 messages of 15001 bytes sent, 1299 for one: 74 bytes a message)
      console.log(`[${name}] ${measured.join("; ")}`)
    })
  })

perBackend("SQLite", () => Promise.resolve("sqlite"))
perBackend("PostgreSQL", () => "skip" in pg ? Promise.resolve(undefined) : (pg as Postgres.Postgres).createDatabase())
