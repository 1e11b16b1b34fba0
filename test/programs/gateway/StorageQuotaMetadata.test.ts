/**
 * A thread's metadata is kept with it, so it counts against the storage quotas. Before, the byte counters counted a
 * thread's checkpoints, run records and events but not its metadata (up to 64 KiB a thread), so a user could keep
 * some 640 MiB of it over `max_threads_per_user`'s 10,000 threads whatever `max_thread_bytes_per_user` said. Now
 * every store counts it (SQLite schema 8, PostgreSQL schema 5, the memory store) as it is written, changed and
 * deleted, and the gateway refuses (403) a thread made, or metadata grown, past a quota; the other user is not
 * affected, and deleting threads frees the space. PostgreSQL is skipped, saying why, when there is none.
 */
import { afterAll, assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as MemoryThreadStore from "../../../src/layers/MemoryThreadStore.js"
import * as PgThreadStore from "../../../src/layers/PgThreadStore.js"
import * as SqliteThreadStore from "../../../src/layers/SqliteThreadStore.js"
import type { StoreError } from "../../../src/services/RunContext.js"
import { ThreadStore } from "../../../src/services/ThreadStore.js"
import * as M from "../../../src/state/Message.js"
import * as Postgres from "../../support/postgres.js"
import * as Requests from "../../support/requests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const KiB = 1024
const pg = await Postgres.forFile("StorageQuotaMetadata")

const use = <A>(
  layer: Layer.Layer<ThreadStore, StoreError>,
  f: (store: ThreadStore["Type"]) => Effect.Effect<A, StoreError>
) =>
  Effect.runPromise(Effect.scoped(Effect.flatMap(Layer.build(layer), (ctx) => f(ctx.unsafeMap.get(ThreadStore.key)))))

interface Backend {
  readonly name: string
  readonly fresh: () => Promise<Layer.Layer<ThreadStore, StoreError>>
}

const backends: ReadonlyArray<Backend> = [
  {
    name: "SQLite",
    fresh: async () =>
      SqliteThreadStore.layer({
        filename: Path.join(Fs.mkdtempSync(Path.join(Os.tmpdir(), "antler-metabytes-")), "antler.sqlite")
      })
  },
  ...("skip" in pg ? [] : [{
    name: "PostgreSQL",
    fresh: async () => PgThreadStore.layer({ url: await (pg as Postgres.Postgres).createDatabase() })
  }]),
  { name: "memory", fresh: async () => Layer.sync(ThreadStore, () => MemoryThreadStore.make()) }
]

const bytes = (value: unknown) => Buffer.byteLength(JSON.stringify(value))

for (const backend of backends) {
  describe(`${backend.name}: a thread's metadata in the byte counters`, () => {
    it("counts as it is written, changed and deleted, in the thread's counter and its owner's", async () => {
      await use(await backend.fresh(), (store) =>
        Effect.gen(function*() {
          const first = { note: "é".repeat(5000) }
          yield* store.ensure("a1", { owner: "alice", metadata: first })
          yield* store.ensure("b1", { owner: "bob", metadata: { note: "short" } })
          assert.strictEqual((yield* store.bytesOf("a1"))!.bytes, bytes(first), "made with it")
          assert.strictEqual(yield* store.bytesOwned("alice", false), bytes(first))
          // a checkpoint adds to it, the metadata stays counted
          const answered = yield* store.appendMeasured("a1", "r1", [{ messages: [M.human("hello")] }], "default")
          assert.isAbove(answered.bytes, bytes(first))
          assert.strictEqual(answered.owned, answered.bytes)
          const grown = { note: first.note, more: "x".repeat(3000) }
          yield* store.patchMetadata("a1", { more: grown.more })
          const grownBy = bytes(grown) - bytes(first)
          assert.strictEqual((yield* store.bytesOf("a1"))!.bytes, answered.bytes + grownBy, "grown")
          assert.strictEqual(yield* store.bytesOwned("alice", false), answered.bytes + grownBy)
          yield* store.patchMetadata("a1", { note: null })
          const shrunk = { more: grown.more }
          const shrunkBy = bytes(shrunk) - bytes(first)
          assert.strictEqual((yield* store.bytesOf("a1"))!.bytes, answered.bytes + shrunkBy, "shrunk")
          // the other user's are theirs; a deleted thread frees its owner's
          assert.strictEqual(yield* store.bytesOwned("bob", false), bytes({ note: "short" }))
          yield* store.delete("a1")
          assert.strictEqual(yield* store.bytesOwned("alice", false), 0)
          assert.strictEqual(yield* store.bytesOwned("bob", false), bytes({ note: "short" }))
        }))
    })
  })
}

describe("the gateway: metadata within max_thread_bytes_per_user", () => {
  let gateway: TestGateway
  afterAll(() => gateway?.stop())

  it("refuses a thread made or metadata grown past the quota (403), not another's; deleting frees it", async () => {
    gateway = await Support.start({
      script: () => "ok",
      config: { gateway: { ...Support.twoUsers, quotas: { max_thread_bytes_per_user: 100 * KiB } } }
    })
    const alice = Requests.as(() => gateway, Support.ALICE)
    const bob = Requests.as(() => gateway, Support.BOB)
    const note = (char: string) => ({ note: char.repeat(40 * KiB) })
    const made: Array<string> = []
    for (const char of ["a", "b"]) {
      const response = await alice("POST", "/threads", { metadata: note(char) })
      assert.strictEqual(response.status, 200, response.text.slice(0, 300))
      made.push(response.json().thread_id)
    }
    // a third 40 KiB would pass 100 KiB: refused, naming the quota, and nothing made
    const third = await alice("POST", "/threads", { metadata: note("c") })
    assert.strictEqual(third.status, 403, third.text.slice(0, 300))
    assert.include(third.json().detail, "max_thread_bytes_per_user")
    const listed = (await alice("POST", "/threads/search", { limit: 100 })).json() as Array<{ thread_id: string }>
    assert.sameMembers(listed.map((t) => t.thread_id), made)
    // a small thread fits; growing one's metadata past the quota does not, shrinking it does
    const small = await alice("POST", "/threads", { metadata: { note: "small" } })
    assert.strictEqual(small.status, 200)
    const grow = await alice("PATCH", `/threads/${made[0]}`, { metadata: { more: "m".repeat(20 * KiB) } })
    assert.strictEqual(grow.status, 403, grow.text.slice(0, 300))
    assert.notProperty((await alice("GET", `/threads/${made[0]}`)).json().metadata, "more")
    const shrink = await alice("PATCH", `/threads/${made[0]}`, { metadata: { note: null } })
    assert.strictEqual(shrink.status, 200, shrink.text.slice(0, 300))
    // bob's quota is his own
    const his = await bob("POST", "/threads", { metadata: note("z") })
    assert.strictEqual(his.status, 200, his.text.slice(0, 300))
    // deleting alice's thread frees her space
    assert.strictEqual((await alice("DELETE", `/threads/${made[1]}`)).status, 204)
    const again = await alice("POST", "/threads", { metadata: note("d") })
    assert.strictEqual(again.status, 200, again.text.slice(0, 300))
  }, 60_000)
})
