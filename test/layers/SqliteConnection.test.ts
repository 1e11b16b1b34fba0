import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as SqliteConnection from "../../src/layers/SqliteConnection.js"

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
})
