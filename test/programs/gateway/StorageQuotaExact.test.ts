/**
 * The storage quotas' check after each checkpoint reads what the checkpoint's own write answered
 * (`ThreadStore.appendMeasured`), not the counters again: before, every checkpoint of a gateway with quotas was the
 * append and then a SELECT of the counters (on SQLite two statements, where the append alone is one; on PostgreSQL
 * five, where the append is four); now it is the append alone. Checked on every store: what the measured append
 * answers is what the counters say once it is kept (the thread's bytes, its owner's, the local user's with the
 * threads made without an owner), on the one-statement path, the path that creates the thread and sets its title,
 * and SQLite's group commit of concurrent runs; and the gateway's bounded store asks the store nothing else per
 * checkpoint. PostgreSQL is skipped, saying why, when there is none.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as MemoryThreadStore from "../../../src/layers/MemoryThreadStore.js"
import * as PgThreadStore from "../../../src/layers/PgThreadStore.js"
import * as SqliteThreadStore from "../../../src/layers/SqliteThreadStore.js"
import * as StorageQuota from "../../../src/programs/gateway/StorageQuota.js"
import type { StoreError } from "../../../src/services/RunContext.js"
import type { ThreadBytes } from "../../../src/services/ThreadStore.js"
import { ThreadStore } from "../../../src/services/ThreadStore.js"
import * as M from "../../../src/state/Message.js"
import * as Postgres from "../../support/postgres.js"

const pg = await Postgres.forFile("StorageQuotaExact")

const use = <A>(
  layer: Layer.Layer<ThreadStore, StoreError>,
  f: (store: ThreadStore["Type"]) => Effect.Effect<A, StoreError>
) =>
  Effect.runPromise(Effect.scoped(Effect.flatMap(Layer.build(layer), (ctx) => f(ctx.unsafeMap.get(ThreadStore.key)))))

interface Backend {
  readonly name: string
  readonly fresh: () => Promise<Layer.Layer<ThreadStore, StoreError>>
}

const sqliteFile = () => Path.join(Fs.mkdtempSync(Path.join(Os.tmpdir(), "antler-exact-")), "antler.sqlite")

const backends: ReadonlyArray<Backend> = [
  { name: "SQLite", fresh: async () => SqliteThreadStore.layer({ filename: sqliteFile() }) },
  ...("skip" in pg ? [] : [{
    name: "PostgreSQL",
    fresh: async () => PgThreadStore.layer({ url: await (pg as Postgres.Postgres).createDatabase() })
  }]),
  { name: "memory", fresh: async () => Layer.sync(ThreadStore, () => MemoryThreadStore.make()) }
]

const LOCAL = "default"

/** What the counters say of `threadId` now, as the quota reads them (the local user's with the unowned threads). */
const countersOf = (store: ThreadStore["Type"], threadId: string) =>
  Effect.gen(function*() {
    const found = (yield* store.bytesOf(threadId))!
    const local = found.owner === null || found.owner === LOCAL
    const owned = local ? yield* store.bytesOwned(LOCAL, true) : found.owned
    return { bytes: found.bytes, owner: found.owner, owned } satisfies ThreadBytes
  })

const text = (n: number, char = "é") => char.repeat(n)

for (const backend of backends) {
  describe(`${backend.name}: a measured append`, () => {
    it("answers what the counters say once it is kept, on every path of the write", async () => {
      await use(await backend.fresh(), (store) =>
        Effect.gen(function*() {
          yield* store.ensure("a1", { owner: "alice" })
          yield* store.ensure("a2", { owner: "alice" })
          yield* store.ensure("b1", { owner: "bob" })
          yield* store.ensure("mine", { owner: LOCAL })
          yield* store.ensure("cli")
          yield* store.saveRun({
            run_id: "r0",
            thread_id: "a1",
            status: "success",
            stop_reason: "completed",
            started_at: "2026-01-01T00:00:00.000Z",
            ended_at: "2026-01-01T00:00:01.000Z",
            metadata: { kwargs: { input: text(400) } }
          })
          const check = (threadId: string, updates: Parameters<ThreadStore["Type"]["append"]>[2]) =>
            Effect.gen(function*() {
              const answered = yield* store.appendMeasured(threadId, "r1", updates, LOCAL)
              assert.deepStrictEqual(answered, yield* countersOf(store, threadId), `${threadId} after its checkpoint`)
              return answered
            })
          // the usual step: one statement
          const first = yield* check("a1", [{ messages: [M.human(text(3000))] }])
          assert.isAbove(first.bytes, 2 * 3000 + 2 * 400)
          yield* check("a1", [{ messages: [M.ai(text(1000, "x"))] }])
          yield* check("a2", [{ messages: [M.human("two")] }])
          // with a title (the thread's row set too), and on a thread that does not exist yet (created by the write)
          yield* check("a2", [{ title: "A title" }])
          const made = yield* check("new", [{ messages: [M.human(text(50))] }])
          assert.strictEqual(made.owner, null)
          // the local user's threads count with those made without an owner; another user's do not
          const local = yield* check("mine", [{ messages: [M.human(text(700))] }])
          const cli = yield* check("cli", [{ messages: [M.human(text(900))] }])
          assert.strictEqual(cli.owned, local.owned + cli.bytes, "the local user's and the unowned threads, together")
          const bob = yield* check("b1", [{ messages: [M.human(text(200))] }])
          assert.strictEqual(bob.owned, bob.bytes, "bob's threads are bob's alone")
          // concurrent runs of the process (on SQLite: one group commit of their steps)
          yield* store.acquireLease({ threadId: "a1", runId: "ra", ttlMs: 60_000, now: Date.now() })
          yield* store.acquireLease({ threadId: "b1", runId: "rb", ttlMs: 60_000, now: Date.now() })
          const together = yield* Effect.all(
            ["a1", "a2", "b1", "cli", "a1", "b1"].map((threadId, i) =>
              store.appendMeasured(threadId, `c${i}`, [{ messages: [M.human(text(100 + i))] }], LOCAL)
            ),
            { concurrency: "unbounded" }
          )
          // each answer is the counters as its own write left them (appends only add): the largest of a thread's is
          // the thread's now, and two of one thread differ by the later one's checkpoint
          const largest = new Map<string, number>()
          ;["a1", "a2", "b1", "cli", "a1", "b1"].forEach((threadId, i) =>
            largest.set(threadId, Math.max(largest.get(threadId) ?? 0, together[i]!.bytes))
          )
          for (const [threadId, bytes] of largest) {
            assert.strictEqual(bytes, (yield* store.bytesOf(threadId))!.bytes, `${threadId} (concurrent)`)
          }
          assert.notStrictEqual(together[0]!.bytes, together[4]!.bytes, "two checkpoints of a1, two answers")
          const alice = together.filter((answer) => answer.owner === "alice").map((answer) => answer.owned)
          assert.strictEqual(Math.max(...alice), yield* store.bytesOwned("alice", false))
        }))
    })
  })
}

describe("the gateway's bounded store", () => {
  it("asks the store one thing per checkpoint, the measured append, and stops past a quota on its answer", async () => {
    await use(SqliteThreadStore.layer({ filename: sqliteFile() }), (inner) =>
      Effect.gen(function*() {
        const calls: Array<string> = []
        const counted = ThreadStore.of({
          ...inner,
          append: (...args) => Effect.zipRight(Effect.sync(() => calls.push("append")), inner.append(...args)),
          appendMeasured: (...args) =>
            Effect.zipRight(Effect.sync(() => calls.push("appendMeasured")), inner.appendMeasured(...args)),
          bytesOf: (threadId) => Effect.zipRight(Effect.sync(() => calls.push("bytesOf")), inner.bytesOf(threadId)),
          bytesOwned: (owner, unowned) =>
            Effect.zipRight(Effect.sync(() => calls.push("bytesOwned")), inner.bytesOwned(owner, unowned))
        })
        const store = StorageQuota.bounded(counted, { thread: 10_000, user: 0 })
        yield* store.ensure("t", { owner: "alice" })
        yield* store.append("t", "r", [{ messages: [M.human(text(1000))] }])
        yield* store.append("t", "r", [{ messages: [M.ai(text(1000))] }])
        // before: ["append", "bytesOf", "append", "bytesOf"]
        assert.deepStrictEqual(calls, ["appendMeasured", "appendMeasured"])
        const past = yield* Effect.either(store.append("t", "r", [{ messages: [M.human(text(5000))] }]))
        assert.isTrue(Either.isLeft(past) && StorageQuota.isStopped(past.left))
        assert.include(Either.isLeft(past) ? past.left.message : "", "max_thread_bytes")
        // the step that passed it is kept whole
        assert.isAbove((yield* inner.bytesOf("t"))!.bytes, 10_000)
      }))
  })
})
