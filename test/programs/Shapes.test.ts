import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Scope from "effect/Scope"
import * as Exit from "effect/Exit"
import { spawnSync } from "node:child_process"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import * as Shapes from "../../src/programs/Shapes.js"

const ROOT = Path.resolve(Path.dirname(fileURLToPath(import.meta.url)), "../..")

describe("Shapes", () => {
  it.live("the exemplars live in the caller's scope; closing it stops the parked fiber and ends", () =>
    Effect.gen(function*() {
      const scope = yield* Scope.make()
      const before = (yield* Fiber.roots).length
      yield* Scope.extend(Shapes.keep, scope)
      assert.strictEqual((yield* Fiber.roots).length, before + 1, "one parked fiber while the scope is open")
      yield* Scope.close(scope, Exit.void)
      assert.strictEqual((yield* Fiber.roots).length, before, "none once it closed")
    }))

  it("a process that keeps them and never closes the scope still exits (the parked fiber holds no timer)", () => {
    const script = `import * as Effect from "effect/Effect"; import * as Scope from "effect/Scope"
      import * as Shapes from "./src/programs/Shapes.ts"
      const scope = Effect.runSync(Scope.make()); Effect.runSync(Scope.extend(Shapes.keep, scope)); console.log("kept")`
    const r = spawnSync(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], {
      cwd: ROOT,
      encoding: "utf8",
      timeout: 30_000
    })
    assert.strictEqual(r.stdout.trim(), "kept", r.stderr)
    assert.strictEqual(r.status, 0, r.stderr)
  }, 40_000)
})
