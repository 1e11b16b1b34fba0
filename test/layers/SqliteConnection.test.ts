import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as SqliteConnection from "../../src/layers/SqliteConnection.js"

const tempFile = () => path.join(fs.mkdtempSync(path.join(os.tmpdir(), "antler-sqlite-connection-")), "a.sqlite")

describe("SqliteConnection.makeLock", () => {
  it.live("bodies never overlap, even when they wait inside; every one runs, in the order they asked", () =>
    Effect.gen(function*() {
      const lock = SqliteConnection.makeLock()
      const trace: Array<string> = []
      let inside = 0
      let most = 0
      const body = (i: number) =>
        lock.exclusively(Effect.gen(function*() {
          inside++
          most = Math.max(most, inside)
          trace.push(`start ${i}`)
          yield* Effect.sleep(i % 3 === 0 ? "2 millis" : "0 millis")
          yield* Effect.yieldNow()
          trace.push(`end ${i}`)
          inside--
          return i
        }))
      const results = yield* Effect.forEach(Array.from({ length: 20 }, (_, i) => i), body, { concurrency: "unbounded" })
      assert.deepStrictEqual(results, Array.from({ length: 20 }, (_, i) => i))
      assert.strictEqual(most, 1)
      assert.deepStrictEqual(trace, Array.from({ length: 20 }, (_, i) => [`start ${i}`, `end ${i}`]).flat())
    }))

  it.live("a failing or dying body gives the lock back", () =>
    Effect.gen(function*() {
      const lock = SqliteConnection.makeLock()
      const failed = yield* Effect.exit(lock.exclusively(Effect.fail("no")))
      const died = yield* Effect.exit(lock.exclusively(Effect.die(new Error("boom"))))
      assert.isTrue(Exit.isFailure(failed) && Exit.isFailure(died))
      assert.strictEqual(yield* lock.exclusively(Effect.succeed("after")), "after")
    }))

  it.live("a waiter interrupted while it waits leaves the lock usable; a running body is not interrupted", () =>
    Effect.gen(function*() {
      const lock = SqliteConnection.makeLock()
      const trace: Array<string> = []
      const holder = yield* Effect.fork(lock.exclusively(
        Effect.zipRight(Effect.sleep("20 millis"), Effect.sync(() => trace.push("holder done")))
      ))
      yield* Effect.sleep("5 millis")
      const waiter = yield* Effect.fork(lock.exclusively(Effect.sync(() => trace.push("waiter ran"))))
      yield* Effect.sleep("5 millis")
      yield* Fiber.interrupt(waiter)
      // the holder is interrupted too, but its body runs to its end
      yield* Fiber.interrupt(holder)
      assert.strictEqual(yield* lock.exclusively(Effect.succeed("next")), "next")
      assert.deepStrictEqual(trace, ["holder done"])
    }))
})

describe("SqliteConnection.open", () => {
  it.scoped("runs writes and queries; a bad statement fails with the driver's error as its cause", () =>
    Effect.gen(function*() {
      const conn = yield* SqliteConnection.open(tempFile())
      yield* conn.executeRaw("CREATE TABLE t (a TEXT)", [])
      const written = yield* conn.executeRaw("INSERT INTO t (a) VALUES (?)", ["x"])
      assert.strictEqual((written as SqliteConnection.RunResult).changes, 1)
      assert.deepStrictEqual(yield* conn.execute("SELECT a FROM t", []), [{ a: "x" }])
      assert.deepStrictEqual(yield* conn.execute("INSERT INTO t (a) VALUES (?)", ["y"]), [])
      const error = yield* Effect.flip(conn.execute("SELECT nope FROM t", []))
      assert.strictEqual(error._tag, "SqlError")
      assert.include(String((error.cause as Error).message), "no such column")
    }))

  it.scoped("a file that cannot be opened fails with a SqlError", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(SqliteConnection.open(path.join(tempFile(), "missing-dir", "a.sqlite")))
      assert.strictEqual(error._tag, "SqlError")
    }))
})
