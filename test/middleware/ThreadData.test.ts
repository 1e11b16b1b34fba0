import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as TestClock from "effect/TestClock"
import * as ThreadData from "../../src/middleware/ThreadData.js"
import { AppConfigService, defaults } from "../../src/services/AppConfig.js"
import * as M from "../../src/state/Message.js"
import * as H from "../support/harness.js"

const withHome = (home: string) =>
  Effect.provide(Layer.succeed(AppConfigService, { config: defaults(), source: undefined, ignored: [], home }))

const tempHome = () => fs.mkdtempSync(path.join(os.tmpdir(), "antler-threaddata-"))

describe("ThreadData helpers", () => {
  it("stamps a human message with its name and the run, keeping its id and other kwargs", () => {
    const message = M.human("hi", { id: "u1", additional_kwargs: { files: [] } })
    const out = ThreadData.stampHumanMessage(message, "run-1", "2026-01-01T00:00:00.000Z")
    assert.deepStrictEqual(out, {
      type: "human",
      id: "u1",
      content: "hi",
      name: "user-input",
      additional_kwargs: { files: [], run_id: "run-1", timestamp: "2026-01-01T00:00:00.000Z" }
    })
    assert.strictEqual(ThreadData.stampHumanMessage(M.human("x", { name: "alice" }), "r", "t").name, "alice")
  })

  it.effect("refuses ids that would leave the data directory", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(ThreadData.resolveThreadPaths("/data", "default", "../../etc"))
      assert.strictEqual(error._tag, "UnsafeThreadPath")
      assert.strictEqual(error.field, "thread_id")
      const paths = yield* ThreadData.resolveThreadPaths("/data/", "u1", "t1")
      assert.strictEqual(paths.outputs, "/data/users/u1/threads/t1/user-data/outputs")
    }))
})

describe("ThreadData middleware", () => {
  it.effect("saves the thread's host directories and stamps the user's message, without creating directories", () =>
    Effect.gen(function*() {
      const home = tempHome()
      yield* TestClock.setTime(Date.UTC(2026, 0, 2, 3, 4, 5))
      const outcome = yield* H.run({
        script: ["ok"],
        threadId: "t-1",
        input: [M.human("hello", { id: "u1" })],
        middlewares: () => [ThreadData.layer()]
      }).pipe(withHome(home))
      const root = `${home}/users/default/threads/t-1/user-data`
      assert.deepStrictEqual(outcome.state.thread_data, {
        workspace_path: `${root}/workspace`,
        uploads_path: `${root}/uploads`,
        outputs_path: `${root}/outputs`
      })
      const first = outcome.state.messages[0]!
      assert.strictEqual(first.id, "u1")
      assert.strictEqual(first.name, "user-input")
      assert.strictEqual(first.additional_kwargs?.timestamp, "2026-01-02T03:04:05.000Z")
      const runStart = outcome.events.find((e) => e.type === "run_start")
      assert.strictEqual(first.additional_kwargs?.run_id, runStart?.type === "run_start" ? runStart.run_id : "")
      assert.strictEqual(outcome.state.messages.length, 2)
      assert.isFalse(fs.existsSync(path.join(home, "users")))
      // The model saw the stamped message (before_agent runs before the first model call).
      assert.strictEqual(outcome.requests[0]!.messages[0]!.name, "user-input")
    }).pipe(H.withStore))

  // DeerFlow test_thread_data_middleware.py::test_before_agent_uses_runtime_user_bucket
  it.effect("puts the thread's directories under the run's user", () =>
    Effect.gen(function*() {
      const home = tempHome()
      const outcome = yield* H.run({
        script: ["ok"],
        threadId: "thread-123",
        userId: "runtime-user",
        middlewares: () => [ThreadData.layer()]
      }).pipe(withHome(home))
      assert.strictEqual(
        outcome.state.thread_data?.workspace_path,
        `${home}/users/runtime-user/threads/thread-123/user-data/workspace`
      )
    }).pipe(H.withStore))

  it.effect("creates the directories when not lazy", () =>
    Effect.gen(function*() {
      const home = tempHome()
      yield* H.run({ script: ["ok"], threadId: "t-2", middlewares: () => [ThreadData.layer({ lazyInit: false })] })
        .pipe(withHome(home))
      for (const dir of ["workspace", "uploads", "outputs"]) {
        assert.isTrue(fs.statSync(`${home}/users/default/threads/t-2/user-data/${dir}`).isDirectory())
      }
    }).pipe(H.withStore))

  it.effect("leaves the thread's messages alone when the last one is not from the user", () =>
    Effect.gen(function*() {
      const home = tempHome()
      const outcome = yield* H.run({
        script: ["ok"],
        input: [M.human("q", { id: "u1" }), M.ai("a", { id: "a1" })],
        middlewares: () => [ThreadData.layer()]
      }).pipe(withHome(home))
      assert.isUndefined(outcome.state.messages[0]!.name)
      assert.isDefined(outcome.state.thread_data?.outputs_path)
    }).pipe(H.withStore))

  it.effect("ends the run as failed, writing nothing, when the thread id is not a safe directory name", () =>
    Effect.gen(function*() {
      const home = tempHome()
      const outcome = yield* H.run({ script: ["ok"], threadId: "../escape", middlewares: () => [ThreadData.layer()] })
        .pipe(withHome(home))
      assert.strictEqual(outcome.end.status, "error")
      assert.strictEqual(outcome.end.error?.name, "UnsafeThreadPath")
      assert.strictEqual(outcome.requests.length, 0)
      assert.isNull(outcome.state.thread_data)
    }).pipe(H.withStore))
})
