/**
 * A run's request secrets are never read into long-term memory: the conversation the Memory middleware queues when
 * the run ends has every value the request gave masked, the model's own answer included (a model may write out a
 * value it put together from a tool's output); the store of memory knows the app's secrets only, not a run's.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Logger from "effect/Logger"
import * as Redacted from "effect/Redacted"
import * as MemoryMW from "../../src/middleware/Memory.js"
import * as Hooks from "../../src/middleware/summarization/Hooks.js"
import { RunContext } from "../../src/services/RunContext.js"
import * as M from "../../src/state/Message.js"
import { runContext } from "../support/fixtures.js"
import * as H from "../support/harness.js"
import { recording } from "../support/memoryRecording.js"

const VALUE = "sk-erp-memory-51d0-DO-NOT-LEAK"

/** A compaction of thread t1 (user u1, model main) that summarises `summarized`. */
const compaction = (summarized: ReadonlyArray<M.Message>) => ({
  summarized,
  preserved: [],
  threadId: "t1",
  userId: "u1",
  agentName: undefined,
  modelName: "main",
  manual: false
})

describe("Memory middleware and a run's request secrets", () => {
  it.effect("the queued conversation has the values masked; a run without secrets is queued as it is", () =>
    Effect.gen(function*() {
      const memory = recording()
      yield* H.run({
        threadId: "mem-secret",
        input: "What is my ERP token?",
        script: [`Your token is ${VALUE}.`],
        options: { modelName: "main", secrets: Redacted.make(new Map([["ERP_TOKEN", VALUE]])) },
        middlewares: () => [MemoryMW.layer({ memory: memory.service })]
      })
      assert.lengthOf(memory.queued, 1)
      const texts = memory.queued[0]!.messages.map(M.text)
      assert.include(texts.join("\n"), "Your token is [redacted].")
      assert.notInclude(JSON.stringify(memory.queued), VALUE)
      yield* H.run({
        threadId: "mem-plain",
        input: "Say it",
        script: [`Your token is ${VALUE}.`],
        options: { modelName: "main" },
        middlewares: () => [MemoryMW.layer({ memory: memory.service })]
      })
      assert.include(memory.queued[1]!.messages.map(M.text).join("\n"), `Your token is ${VALUE}.`)
    }).pipe(H.withStore))

  it.effect("what a run's compaction hands memory before it summarises has the values masked too", () =>
    Effect.gen(function*() {
      const memory = recording()
      const event = compaction([M.human("What is my token?"), M.ai(`Your token is ${VALUE}.`)])
      const hook = MemoryMW.beforeCompaction({ memory: memory.service })
      const context = runContext()
      yield* hook(event).pipe(Effect.provideService(RunContext, {
        ...context,
        options: { ...context.options, secrets: Redacted.make(new Map([["ERP_TOKEN", VALUE]])) }
      }))
      assert.notInclude(JSON.stringify(memory.queued[0]), VALUE)
      assert.include(memory.queued[0]!.messages.map(M.text).join("\n"), "Your token is [redacted].")
      // (outside a run: as it is)
      yield* hook(event)
      assert.include(memory.queued[1]!.messages.map(M.text).join("\n"), VALUE)
    }))

  // DeerFlow's memory_flush_hook: a failure of it is logged by that name (test_summarization_middleware.py's
  // test_before_summarization_hook_exception_does_not_block_compression logs `before_summarization hook NAME failed`)
  it.effect("memory's flush hook is named as DeerFlow's in the log of its failure", () =>
    Effect.gen(function*() {
      const memory = recording()
      const broken = { ...memory.service, enqueue: () => Effect.die(new Error("queue closed")) }
      const logged: Array<string> = []
      const capture = Logger.replace(
        Logger.defaultLogger,
        Logger.make(({ message }) => void logged.push((Array.isArray(message) ? message : [message]).join(" ")))
      )
      yield* Hooks.run([MemoryMW.beforeCompaction({ memory: broken })], compaction([M.human("hi")])).pipe(
        Effect.provide(capture)
      )
      assert.deepStrictEqual(logged, ["before_summarization hook memory_flush_hook failed"])
    }))
})
