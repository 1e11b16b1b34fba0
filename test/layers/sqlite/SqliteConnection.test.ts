import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Schedule from "effect/Schedule"
import { spawnSync } from "node:child_process"
import { createRequire } from "node:module"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as SqliteConnection from "../../../src/layers/sqlite/SqliteConnection.js"

const tempFile = () => path.join(fs.mkdtempSync(path.join(os.tmpdir(), "antler-sqlite-connection-")), "a.sqlite")

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

  it.live("the write-ahead log is checkpointed into the file by a worker while the connection stays open", () =>
    Effect.gen(function*() {
      const file = tempFile()
      const rows = 2_000
      yield* Effect.scoped(Effect.gen(function*() {
        const conn = yield* SqliteConnection.open(file)
        // the connection itself never checkpoints (that work is off its thread)
        assert.deepStrictEqual(yield* conn.execute("PRAGMA wal_autocheckpoint", []), [{ wal_autocheckpoint: 0 }])
        yield* conn.executeRaw("CREATE TABLE t (a TEXT)", [])
        const empty = fs.statSync(file).size
        for (let i = 0; i < rows; i++) yield* conn.executeRaw("INSERT INTO t (a) VALUES (?)", ["x".repeat(500)])
        // the rows reach the database file itself (not only the log) while the connection is open
        yield* Effect.suspend(() => Effect.succeed(fs.statSync(file).size)).pipe(
          Effect.repeat({ schedule: Schedule.spaced("20 millis"), until: (size) => size > empty + rows * 400 }),
          Effect.timeoutFail({ duration: "20 seconds", onTimeout: () => new Error("the log was never checkpointed") })
        )
        assert.deepStrictEqual(yield* conn.execute("SELECT COUNT(*) AS n FROM t", []), [{ n: rows }])
      }))
      // closed: every row is in the file, the log is gone, and another connection reads them all
      assert.isFalse(fs.existsSync(`${file}-wal`))
      const Sqlite = createRequire(import.meta.url)("better-sqlite3")
      const db = new Sqlite(file, { readonly: true })
      assert.deepStrictEqual(db.prepare("SELECT COUNT(*) AS n FROM t").get(), { n: rows })
      db.close()
    }))

  it.live("checkpoints go on while the connection's thread is busy and its event loop never turns", () =>
    Effect.gen(function*() {
      const file = tempFile()
      yield* Effect.scoped(Effect.gen(function*() {
        const conn = yield* SqliteConnection.open(file)
        yield* conn.executeRaw("CREATE TABLE t (a TEXT)", [])
        const empty = fs.statSync(file).size
        // one synchronous stretch, as a CPU-bound burst of runs is: the worker's messages are not read until
        // it ends, so only what the worker shares in memory can tell that a checkpoint is done
        const reached = Effect.sync(() => {
          const write = (n: number) => {
            for (let i = 0; i < n; i++) Either.getOrThrow(conn.writeNow("INSERT INTO t (a) VALUES (?)", ["x".repeat(500)]))
          }
          // waits (writing a row a millisecond: each write may ask for the next checkpoint) until the file
          // holds that many rows; how soon depends on how fast the worker is, never on this thread's loop
          const fileHolds = (rows: number) => {
            const until = Date.now() + 20_000
            while (Date.now() < until) {
              if (fs.statSync(file).size > empty + rows * 400) return true
              const pause = Date.now() + 1
              while (Date.now() < pause);
              write(1)
            }
            return false
          }
          write(400)
          const first = fileHolds(300)
          write(600)
          return { first, second: fileHolds(900) }
        })
        assert.deepStrictEqual(yield* reached, { first: true, second: true })
      }))
    }))

  it.scopedLive("a file named by a relative path is checkpointed even after the process changed directory", () =>
    Effect.gen(function*() {
      const dir = path.dirname(tempFile())
      const cwd = process.cwd()
      yield* Effect.addFinalizer(() => Effect.sync(() => process.chdir(cwd)))
      process.chdir(dir)
      const conn = yield* SqliteConnection.open("a.sqlite")
      yield* conn.executeRaw("CREATE TABLE t (a TEXT)", [])
      const file = path.join(dir, "a.sqlite")
      const empty = fs.statSync(file).size
      // elsewhere, a file of the same name that the worker must not take for this one
      const elsewhere = path.dirname(tempFile())
      fs.copyFileSync(file, path.join(elsewhere, "a.sqlite"))
      process.chdir(elsewhere)
      for (let i = 0; i < 1_000; i++) yield* conn.executeRaw("INSERT INTO t (a) VALUES (?)", ["x".repeat(500)])
      yield* Effect.suspend(() => Effect.succeed(fs.statSync(file).size)).pipe(
        Effect.repeat({ schedule: Schedule.spaced("20 millis"), until: (size) => size > empty + 1_000 * 400 }),
        Effect.timeoutFail({ duration: "20 seconds", onTimeout: () => new Error("the log was never checkpointed") })
      )
    }))

  it.scopedLive("when the worker cannot open the file, the connection goes back to checkpointing by itself", () =>
    Effect.gen(function*() {
      const file = tempFile()
      const conn = yield* SqliteConnection.open(file)
      yield* conn.executeRaw("CREATE TABLE t (a TEXT)", [])
      // the worker opens the file by name, which is gone; this connection keeps its open file
      fs.unlinkSync(file)
      for (let i = 0; i < 400; i++) yield* conn.executeRaw("INSERT INTO t (a) VALUES (?)", ["x"])
      const setting = conn.execute("PRAGMA wal_autocheckpoint", []).pipe(
        Effect.map((rows) => (rows[0] as { wal_autocheckpoint: number }).wal_autocheckpoint)
      )
      yield* setting.pipe(
        Effect.repeat({ schedule: Schedule.spaced("20 millis"), until: (value) => value === 1000 }),
        Effect.timeoutFail({ duration: "20 seconds", onTimeout: () => new Error("no fallback to autocheckpoint") })
      )
      assert.deepStrictEqual(yield* conn.execute("SELECT COUNT(*) AS n FROM t", []), [{ n: 400 }])
    }))

  it("a process that leaves its connection open still exits: the checkpointing worker never keeps it alive", () => {
    const file = tempFile()
    const script = path.join(path.dirname(file), "leave-open.mjs")
    fs.writeFileSync(script, `
      import * as Effect from ${JSON.stringify(path.resolve("node_modules/effect/dist/esm/Effect.js"))}
      import * as SqliteConnection from ${JSON.stringify(path.resolve("src/layers/sqlite/SqliteConnection.ts"))}
      await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
        const conn = yield* SqliteConnection.open(${JSON.stringify(file)})
        yield* conn.executeRaw("CREATE TABLE t (a TEXT)", [])
        for (let i = 0; i < 1000; i++) yield* conn.executeRaw("INSERT INTO t (a) VALUES (?)", ["x"])
        yield* Effect.sleep("200 millis")
        console.log("written")
        // the scope's release is never reached: with nothing left to do, the process ends here
        yield* Effect.promise(() => new Promise(() => {}))
      })))
    `)
    const child = spawnSync(process.execPath, ["--import", "tsx", script], { encoding: "utf8", timeout: 20_000 })
    assert.strictEqual(child.signal, null, `the process had to be killed: ${child.stderr}`)
    assert.include(child.stdout, "written")
  })
})
