/**
 * A thread's copy (and a branch) reserves what the thread keeps (`max_thread_bytes_per_user`) until it is done, and
 * what it has copied frees that reservation as it is kept, as a run's checkpoints free its own. Before, the copy's
 * checkpoints (kept under the ids of the runs they copy, not the copy's; a branch's seeds under runs of their own)
 * freed none of it: while the copy went, what it had written counted twice, kept and still reserved, and a user near
 * the limit was refused a write that fitted. On SQLite and on PostgreSQL (for the copy two gateways: the copy on one,
 * the write on the other; skipped, saying why, without PostgreSQL). The copy is held at its end, all its checkpoints
 * kept, until the test has written (the store's release of the copy's lease waits; a branch's last seed waits once
 * kept); the model is SCRIPTED, the clients speak HTTP.
 */
import { afterAll, assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as ThreadIds from "../../../src/programs/gateway/ThreadIds.js"
import type { ThreadStore } from "../../../src/services/ThreadStore.js"
import { gate } from "../../support/gate.js"
import * as Postgres from "../../support/postgres.js"
import * as Requests from "../../support/requests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const { ALICE } = Support
const KiB = 1024
const LIMIT = 400 * KiB

const pg = await Postgres.start()
if ("skip" in pg) console.warn(`[StorageQuota26CopyDrain PostgreSQL] skipped: ${pg.skip}`)
afterAll(() => ("stop" in pg ? pg.stop() : undefined))

const human = (content: string) => ({ messages: [{ type: "human", content }] })

/** The gateway's configuration: the two users, `max_thread_bytes_per_user` alone set, on `extra`'s database. */
const quotaConfig = (extra: Record<string, unknown>) => ({
  ...extra,
  gateway: { ...Support.twoUsers, quotas: { max_user_bytes: 0, max_thread_bytes: 0, max_thread_bytes_per_user: LIMIT } }
})


const perBackend = (name: string, database: () => Promise<Record<string, unknown> | undefined>, two: boolean) =>
  describe(`${name}: a copy's checkpoints free its reservation`, () => {
    const gateways: Array<TestGateway> = []
    afterAll(() => Promise.all(gateways.map((g) => g.stop())))

    it("a user near the limit copies a thread and, while the copy goes, can still write what remains", async (c) => {
      const extra = await database()
      if (extra === undefined) return c.skip()
      const config = quotaConfig(extra)
      // the copy's end (its lease let go) waits for the test once all its checkpoints are kept
      const held = gate()
      const wrapStore = (store: ThreadStore["Type"]): ThreadStore["Type"] => ({
        ...store,
        releaseLease: (threadId, holder) =>
          holder.startsWith("copy-thread-")
            ? Effect.zipRight(held.wait, store.releaseLease(threadId, holder))
            : store.releaseLease(threadId, holder)
      })
      const a = await Support.start({ script: () => "ok", config, wrapStore })
      gateways.push(a)
      const b = two ? await Support.start({ script: () => "ok", config }) : a
      if (two) gateways.push(b)
      const aliceA = Requests.as(() => a, ALICE)
      const aliceB = Requests.as(() => b, ALICE)
      const source = (await aliceA("POST", "/threads", {})).json().thread_id as string
      const ran = await aliceA("POST", `/threads/${source}/runs/wait`, {
        assistant_id: "lead_agent",
        input: human("s".repeat(20 * KiB))
      })
      assert.strictEqual(ran.status, 200, ran.text.slice(0, 300))
      const other = (await aliceB("POST", "/threads", {})).json().thread_id as string
      const stored = Option.getOrThrow(await Effect.runPromise(ThreadIds.find(a.store, "alice", source))).thread_id
      const used = await Effect.runPromise(a.store.bytesOwned("alice", false))
      const kept = (await Effect.runPromise(a.store.bytesOf(stored)))!.bytes
      assert.isAtMost(used + kept, LIMIT - 40 * KiB, `alice keeps ${used}, the thread ${kept}`)

      const copy = aliceA("POST", `/threads/${source}/copy`)
      await held.entered
      const during = await Effect.runPromise(a.store.bytesOwned("alice", false))
      assert.isAbove(during - used, 50 * KiB, "the copy's checkpoints are kept")
      // what remains beside what alice keeps and the copy may still add (4 KiB left for the update's framing)
      const remains = LIMIT - used - kept - 4 * KiB
      const update = await aliceB("POST", `/threads/${other}/state`, {
        values: { messages: [{ type: "human", content: "u".repeat(remains) }] }
      })
      assert.strictEqual(update.status, 200, `${during} kept during the copy: ${update.text.slice(0, 300)}`)
      held.release()
      const done = await copy
      assert.strictEqual(done.status, 200, done.text.slice(0, 300))
      assert.isAtMost(await Effect.runPromise(a.store.bytesOwned("alice", false)), LIMIT)
      // nothing stays reserved once it is done: the next write is measured against what alice keeps alone
      const now = await Effect.runPromise(a.store.bytesOwned("alice", false))
      const last = await aliceB("POST", `/threads/${other}/state`, {
        values: { messages: [{ type: "human", content: "v".repeat(Math.max(0, LIMIT - now - 4 * KiB)) }] }
      })
      assert.strictEqual(last.status, 200, `${now} kept: ${last.text.slice(0, 300)}`)
    })
  })

/** The same for a branch from the latest answer: its seeds, under runs of their own, free its reservation. */
const branchPerBackend = (name: string, database: () => Promise<Record<string, unknown> | undefined>) =>
  describe(`${name}: a branch's seeds free its reservation`, () => {
    const gateways: Array<TestGateway> = []
    afterAll(() => Promise.all(gateways.map((g) => g.stop())))

    it("a user near the limit branches a thread and, while it is seeded, can still write what remains", async (c) => {
      const extra = await database()
      if (extra === undefined) return c.skip()
      const config = quotaConfig(extra)
      // the branch's last seed (the one with the artifacts), once kept, waits for the test: the seeds before it are
      // kept and told
      const held = gate()
      const wrapStore = (store: ThreadStore["Type"]): ThreadStore["Type"] => ({
        ...store,
        // (the gateway's store keeps a checkpoint under quotas by `appendMeasured`)
        appendMeasured: (threadId, runId, updates, owner, options) =>
          runId.startsWith("branch-seed-") && updates.some((update) => "artifacts" in update)
            ? Effect.tap(store.appendMeasured(threadId, runId, updates, owner, options), () => held.wait)
            : store.appendMeasured(threadId, runId, updates, owner, options)
      })
      const gateway = await Support.start({ script: () => "ok", config, wrapStore })
      gateways.push(gateway)
      const alice = Requests.as(() => gateway, ALICE)
      assert.strictEqual((await alice("POST", "/api/threads", { thread_id: "trunk" })).status, 200)
      const ran = await alice("POST", `/threads/trunk/runs/wait`, {
        assistant_id: "lead_agent",
        input: human("s".repeat(20 * KiB))
      })
      assert.strictEqual(ran.status, 200, ran.text.slice(0, 300))
      // a second turn: the branch is seeded with the state before it, then the turn (the seed the test holds)
      const again = await alice("POST", `/threads/trunk/runs/wait`, { assistant_id: "lead_agent", input: human("q") })
      assert.strictEqual(again.status, 200, again.text.slice(0, 300))
      const other = (await alice("POST", "/threads", {})).json().thread_id as string
      const messages: Array<any> = (await alice("GET", "/threads/trunk/state")).json().values.messages
      const answer = messages.findLast((m) => m.type === "ai")
      const stored = Option.getOrThrow(await Effect.runPromise(ThreadIds.find(gateway.store, "alice", "trunk")))
      const used = await Effect.runPromise(gateway.store.bytesOwned("alice", false))
      const kept = (await Effect.runPromise(gateway.store.bytesOf(stored.thread_id)))!.bytes

      const branch = alice("POST", "/api/threads/trunk/branches", { message_id: answer.id })
      await held.entered
      const during = await Effect.runPromise(gateway.store.bytesOwned("alice", false))
      assert.isAbove(during - used, 15 * KiB, "the branch's seeds are kept")
      const update = await alice("POST", `/threads/${other}/state`, {
        values: { messages: [{ type: "human", content: "u".repeat(LIMIT - used - kept - 4 * KiB) }] }
      })
      assert.strictEqual(update.status, 200, `${during} kept while seeding: ${update.text.slice(0, 300)}`)
      held.release()
      const done = await branch
      assert.strictEqual(done.status, 200, done.text.slice(0, 300))
      assert.isAtMost(await Effect.runPromise(gateway.store.bytesOwned("alice", false)), LIMIT)
    })
  })

const sqlite = () => Promise.resolve({})
const postgres = async () =>
  "skip" in pg ? undefined : { database: { url: await (pg as Postgres.Postgres).createDatabase() } }
perBackend("SQLite", sqlite, false)
perBackend("PostgreSQL", postgres, true)
branchPerBackend("SQLite", sqlite)
branchPerBackend("PostgreSQL", postgres)
