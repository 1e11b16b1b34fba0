/** Small fixtures shared by tests: temporary directories removed after the file's tests, a run context. */
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { afterAll } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { RunContext } from "../../src/services/RunContext.js"

/** `tempDir(prefix)` makes a directory under the system temp dir; all of them go when the file's tests end. */
export const tempDirs = () => {
  const dirs: Array<string> = []
  afterAll(() => {
    for (const dir of dirs) Fs.rmSync(dir, { recursive: true, force: true })
  })
  return (prefix: string) => {
    const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), prefix))
    dirs.push(dir)
    return dir
  }
}

/** A run context for calling tools or middlewares outside a run. */
export const runContext = (threadId = "t1", userId = "u1"): RunContext["Type"] =>
  RunContext.of({
    threadId,
    runId: "r1",
    userId,
    options: { recursionLimit: 100, toolConcurrency: 4 },
    stopReason: Effect.succeed(undefined),
    setStopReason: () => Effect.void
  })
