/**
 * The switch under which the bubblewrap suites fail instead of skipping (`ANTLER_REQUIRE_BWRAP=1`, set by
 * `.ci/run`): without it a missing `bwrap` skips them; with it a missing or unusable one is an error that says so.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Bwrap from "./bwrap.js"
import { tempDirs } from "./fixtures.js"

const tempDir = tempDirs()

/** A directory holding an executable `bwrap` (a stand-in: only its presence is looked at before the probe). */
const withBwrap = () => {
  const dir = tempDir("antler-bwrap-path-")
  Fs.writeFileSync(Path.join(dir, "bwrap"), "#!/bin/sh\nexit 1\n", { mode: 0o755 })
  return dir
}
const nowhere = () => tempDir("antler-no-bwrap-")
const works = Effect.succeed({ available: true, path: "/usr/bin/bwrap", mode: "staged" } as const)
const broken = Effect.succeed({ available: false, reason: "user namespaces are disabled here" } as const)

const rejection = (promise: Promise<unknown>) =>
  promise.then(() => assert.fail("expected an error"), (error: Error) => error.message)

describe("ANTLER_REQUIRE_BWRAP", () => {
  it("without it, the suites run where bwrap is on PATH and are skipped where it is not", async () => {
    assert.isFalse(await Bwrap.installed({ PATH: nowhere() }, broken))
    assert.isTrue(await Bwrap.installed({ PATH: withBwrap() }, broken))
  })

  it("with it, a bwrap missing from PATH is an error naming the switch", async () => {
    const message = await rejection(Bwrap.installed({ PATH: nowhere(), ANTLER_REQUIRE_BWRAP: "1" }, works))
    assert.include(message, "ANTLER_REQUIRE_BWRAP=1")
    assert.include(message, "`bwrap` was not found on PATH")
  })

  it("with it, a bwrap that cannot build a sandbox is an error with the probe's reason", async () => {
    const message = await rejection(Bwrap.installed({ PATH: withBwrap(), ANTLER_REQUIRE_BWRAP: "1" }, broken))
    assert.include(message, "ANTLER_REQUIRE_BWRAP=1")
    assert.include(message, "user namespaces are disabled here")
  })

  it("with it, a bwrap that works runs the suites", async () => {
    assert.isTrue(await Bwrap.installed({ PATH: withBwrap(), ANTLER_REQUIRE_BWRAP: "1" }, works))
  })
})
