/**
 * The memory queue keeps a thread's signals until its update (DeerFlow test_memory_queue.py
 * `test_queue_add_preserves_existing_{correction,reinforcement}_flag_for_same_thread`): a run whose user corrected
 * the agent, replaced in the queue by the thread's next run before the debounce ended, still gives the update its
 * correction hint; another thread's update does not get it.
 */
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Scope from "effect/Scope"
import * as Path from "node:path"
import * as ConfigFile from "../../../src/layers/ConfigFile.js"
import * as FileMemory from "../../../src/layers/FileMemory.js"
import * as MemoryThreadStore from "../../../src/layers/MemoryThreadStore.js"
import * as ScriptedModel from "../../../src/layers/ScriptedModel.js"
import { Memory } from "../../../src/services/Memory.js"
import type { ModelRequest } from "../../../src/services/ModelService.js"
import { ModelService } from "../../../src/services/ModelService.js"
import { ThreadStore } from "../../../src/services/ThreadStore.js"
import * as M from "../../../src/state/Message.js"
import { tempDirs } from "../../support/fixtures.js"

const tempDir = tempDirs()
const NO_CHANGE = JSON.stringify({ user: {}, history: {}, newFacts: [], factsToRemove: [] })
const CORRECTION_HINT = "Explicit correction signals were detected in this conversation."
const REINFORCEMENT_HINT = "Positive reinforcement signals were detected in this conversation."

const setup = (dir: string, script: ScriptedModel.Script) =>
  Effect.gen(function*() {
    const requests: Array<ModelRequest> = []
    const scripted = ScriptedModel.make(script)
    const model = ModelService.of({ generate: (r) => Effect.suspend(() => (requests.push(r), scripted.generate(r))) })
    const scope = yield* Scope.make()
    const context = yield* Layer.buildWithScope(
      FileMemory.layer().pipe(
        Layer.provide(Layer.succeed(ModelService, model)),
        Layer.provide(Layer.succeed(ThreadStore, MemoryThreadStore.make())),
        Layer.provide(ConfigFile.layerFromObject({ memory: { backend_config: { debounce_seconds: 600 } } }, {
          home: Path.join(dir, "home"),
          source: Path.join(dir, "config.yaml")
        })),
        Layer.provide(NodeFileSystem.layer)
      ),
      scope
    )
    return { memory: context.pipe((c) => c.unsafeMap.get(Memory.key) as Memory["Type"]), requests }
  })

/** Three exchanges without a signal: the last six lines of the thread hold none. */
const plain = (n: number) =>
  Array.from({ length: 3 }, (_, i) => [M.human(`Question ${n}.${i} about the build?`), M.ai(`Answer ${n}.${i}.`)])
    .flat()

const promptOf = (request: ModelRequest) => request.messages.map(M.text).join("\n")

describe("the memory queue", () => {
  for (const [signal, said, hint] of [
    ["correction", "No, that's wrong: use make dev.", CORRECTION_HINT],
    ["reinforcement", "Yes, exactly! That's what I needed.", REINFORCEMENT_HINT]
  ] as const) {
    it.effect(`keeps a replaced run's ${signal} signal for its thread's update`, () =>
      Effect.gen(function*() {
        const { memory, requests } = yield* setup(tempDir("antler-memqueue-"), [NO_CHANGE, NO_CHANGE])
        const first = [M.human("Start the app."), M.ai("Run npm start."), M.human(said), M.ai("Noted.")]
        yield* memory.enqueue({ threadId: "t1", userId: "default", messages: first })
        // the thread's next run, before the debounce ended: it replaces the first in the queue
        yield* memory.enqueue({ threadId: "t1", userId: "default", messages: [...first, ...plain(1)] })
        yield* memory.enqueue({ threadId: "t2", userId: "default", messages: plain(2) })
        yield* memory.flush
        assert.lengthOf(requests, 2)
        const [t1, t2] = requests.map(promptOf)
        assert.include(t1, said)
        assert.include(t1, hint)
        assert.notInclude(t2, hint)
      }))
  }

  it.effect("gives no hint to a thread whose runs had no signal", () =>
    Effect.gen(function*() {
      const { memory, requests } = yield* setup(tempDir("antler-memqueue-"), [NO_CHANGE])
      yield* memory.enqueue({ threadId: "t1", userId: "default", messages: plain(1) })
      yield* memory.enqueue({ threadId: "t1", userId: "default", messages: [...plain(1), ...plain(3)] })
      yield* memory.flush
      assert.lengthOf(requests, 1)
      assert.notInclude(promptOf(requests[0]!), "signals were detected")
    }))
})
