/**
 * The kill test: a run killed with SIGKILL in the middle of a step (no cleanup, no finalizer) loses no
 * completed step, leaves no tool call without its result, and the thread resumes in another process.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import * as ScriptedModel from "../../src/layers/ScriptedModel.js"
import * as SqliteThreadStore from "../../src/layers/SqliteThreadStore.js"
import * as Toolkit from "../../src/layers/Toolkit.js"
import * as Middleware from "../../src/middleware/Middleware.js"
import * as Run from "../../src/programs/Run.js"
import type { ModelRequest } from "../../src/services/ModelService.js"
import * as Tool from "../../src/services/Tool.js"
import { ThreadStore } from "../../src/services/ThreadStore.js"
import type { Message } from "../../src/state/Message.js"
import * as M from "../../src/state/Message.js"

const root = fileURLToPath(new URL("../..", import.meta.url))
const fixture = fileURLToPath(new URL("../fixtures/kill-child.ts", import.meta.url))

/** The step whose tool never returns in the child. Steps 1..K-1 complete. */
const K = 4

/** Every tool call of every AI message has a ToolMessage after it. */
const unansweredCalls = (messages: ReadonlyArray<Message>): ReadonlyArray<string> =>
  messages.flatMap((message, i) =>
    M.toolCalls(message)
      .filter((call) => !messages.slice(i + 1).some((later) => later.type === "tool" && later.tool_call_id === call.id))
      .map((call) => call.id)
  )

const ChildLine = Schema.parseJson(Schema.Union(
  Schema.Struct({ event: Schema.Literal("message"), message: M.Message }),
  Schema.Struct({ event: Schema.Literal("hanging"), step: Schema.Number })
))

interface Child {
  readonly lines: ReadonlyArray<typeof ChildLine.Type>
  readonly stderr: () => string
  readonly exitCode: () => number | null
  readonly kill: () => Effect.Effect<NodeJS.Signals | null>
}

/** Starts the child; the scope kills it if the test ends before it does. */
const spawnChild = (filename: string, threadId: string) =>
  Effect.acquireRelease(
    Effect.sync(() => {
      const process_ = spawn(process.execPath, ["--import", "tsx", fixture, filename, threadId, String(K)], {
        cwd: root,
        stdio: ["ignore", "pipe", "pipe"]
      })
      const lines: Array<typeof ChildLine.Type> = []
      let stdout = ""
      let stderr = ""
      process_.stdout.setEncoding("utf8").on("data", (chunk: string) => {
        stdout += chunk
        let newline: number
        while ((newline = stdout.indexOf("\n")) >= 0) {
          lines.push(Schema.decodeUnknownSync(ChildLine)(stdout.slice(0, newline)))
          stdout = stdout.slice(newline + 1)
        }
      })
      process_.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk))
      const exited = new Promise<NodeJS.Signals | null>((resolve) =>
        process_.once("exit", (_code, signal) => resolve(signal))
      )
      const child: Child = {
        lines,
        stderr: () => stderr,
        exitCode: () => process_.exitCode,
        kill: () =>
          Effect.promise(() => {
            process_.kill("SIGKILL")
            return exited
          })
      }
      return [process_, child] as const
    }),
    ([process_]) =>
      Effect.sync(() => {
        if (process_.exitCode === null && process_.signalCode === null) process_.kill("SIGKILL")
      })
  ).pipe(Effect.map(([, child]) => child))

describe("resume after a killed process", () => {
  it.live("a run SIGKILLed mid-step loses no completed step and resumes to completion in another process", () =>
    Effect.scoped(Effect.gen(function*() {
      const filename = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "antler-resume-")), "antler.sqlite")
      const threadId = "killed-thread"
      const store = SqliteThreadStore.layer({ filename })
      const child = yield* spawnChild(filename, threadId)

      // Wait, reading the database as another process would, until step K-1's result is saved and the child
      // says the tool of step K is running.
      const ready = Effect.gen(function*() {
        if (child.exitCode() !== null) {
          return yield* Effect.dieMessage(`the child exited early (${child.exitCode()}): ${child.stderr()}`)
        }
        const loaded = yield* (yield* ThreadStore).load(threadId)
        const saved = Option.match(loaded, { onNone: () => [], onSome: (thread) => thread.state.messages })
        const lastStepSaved = saved.some((m) => m.type === "tool" && m.tool_call_id === `call-${K - 1}`)
        return lastStepSaved && child.lines.some((line) => line.event === "hanging" && line.step === K)
      })
      yield* ready.pipe(
        Effect.repeat({ schedule: Schedule.spaced("50 millis"), until: (done) => done }),
        Effect.timeoutFail({
          duration: "120 seconds",
          onTimeout: () => new Error(`the child never reached step ${K}; its stderr: ${child.stderr()}`)
        }),
        Effect.provide(store)
      )

      // No cleanup runs in the child: no finalizer, no closing of dangling calls, no last checkpoint.
      assert.strictEqual(yield* child.kill(), "SIGKILL")
      // The saved steps are in the killed writer's write-ahead log, which the next opener has to recover.
      assert.isAbove(fs.statSync(`${filename}-wal`).size, 0)

      const written = child.lines.flatMap((line) => (line.event === "message" ? [line.message] : []))
      const lastCompleted = written.findIndex((m) => m.type === "tool" && m.tool_call_id === `call-${K - 1}`)
      const completed = written.slice(0, lastCompleted + 1)
      // The kill came in the middle of step K: its AI message (with the call) was saved before the tool ran.
      assert.deepStrictEqual(written.slice(lastCompleted + 1).map((m) => M.toolCalls(m)[0]?.id), [`call-${K}`])
      const stepK = written[lastCompleted + 1]!
      assert.strictEqual(completed.length, 1 + 2 * (K - 1))

      // A new process opens the same file (SQLite recovers the killed writer's WAL) and resumes the thread.
      const requests: Array<ModelRequest> = []
      const resumedModel = ScriptedModel.make((request, call) => {
        requests.push(request)
        return call === 0
          ? M.ai(`Resuming at step ${K}.`, {
            id: "resume-ai-1",
            tool_calls: [{ id: `resume-call-${K}`, name: "work", args: { step: K }, type: "tool_call" }]
          })
          : M.ai(`All ${K} steps are done.`, { id: "resume-ai-2" })
      })
      const work = Tool.make({
        name: "work",
        description: "Does one step of the work.",
        parameters: Schema.Struct({ step: Schema.Number }),
        handler: ({ step }) => Effect.succeed(`Step ${step} is done.`)
      })
      const { before, end, after } = yield* Effect.gen(function*() {
        const threads = yield* ThreadStore
        const before = Option.getOrThrow(yield* threads.load(threadId))
        const end = yield* Run.execute(
          { threadId, runId: "resumed-run", input: [] },
          Middleware.base(resumedModel, Toolkit.make([work]))
        )
        const after = Option.getOrThrow(yield* threads.load(threadId))
        return { before, end, after }
      }).pipe(Effect.provide(SqliteThreadStore.layer({ filename })))

      // Every message of every completed step, in order, with its original id and content, then step K's call.
      assert.deepStrictEqual(before.state.messages, [...completed, stepK])
      assert.deepStrictEqual(unansweredCalls(before.state.messages), [`call-${K}`])
      // The resumed run answers the call the crash left open (it may have partly run) before the model is
      // asked: the model sees that history and decides; Antler itself runs nothing twice.
      const interrupted = requests[0]!.messages.at(-1)!
      assert.strictEqual(interrupted.type, "tool")
      assert.strictEqual((interrupted as M.ToolMessage).tool_call_id, `call-${K}`)
      assert.strictEqual(M.text(interrupted), Run.INTERRUPTED_TOOL_RESULT)
      assert.deepStrictEqual(
        requests[0]!.messages.slice(0, -1).map((m) => m.id),
        [...completed, stepK].map((m) => m.id)
      )

      assert.strictEqual(end.status, "success")
      assert.strictEqual(end.stop_reason, "completed")
      const messages = after.state.messages
      assert.deepStrictEqual(messages.slice(0, completed.length + 1), [...completed, stepK])
      assert.deepStrictEqual(messages.slice(completed.length + 1).map((m) => [m.type, m.id]), [
        ["tool", interrupted.id],
        ["ai", "resume-ai-1"],
        ["tool", messages[completed.length + 3]!.id],
        ["ai", "resume-ai-2"]
      ])
      assert.strictEqual(M.text(messages.at(-1)!), `All ${K} steps are done.`)
      assert.deepStrictEqual(unansweredCalls(messages), [])
      const resumedRun = after.runs.find((run) => run.run_id === "resumed-run")
      assert.deepStrictEqual([resumedRun?.status, resumedRun?.stop_reason], ["success", "completed"])
      // the killed run does not stay "running" forever: the next run of the thread records that it died
      const killedRun = after.runs.find((run) => run.run_id !== "resumed-run")
      assert.deepStrictEqual([killedRun?.status, killedRun?.stop_reason], ["cancelled", "cancelled"])
    })), 240_000)
})
