/**
 * A memory service over a `memory.json` a test wrote (MemorySummary.memory26, MemoryPromptInjection.deerflow30):
 * `FileMemory` over the default user's file under `home`, its model a scripted one that is never asked.
 */
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as ConfigFile from "../../src/layers/ConfigFile.js"
import * as FileMemory from "../../src/layers/FileMemory.js"
import * as MemoryThreadStore from "../../src/layers/MemoryThreadStore.js"
import * as ScriptedModel from "../../src/layers/ScriptedModel.js"
import { Memory } from "../../src/services/Memory.js"
import { ModelService } from "../../src/services/ModelService.js"

/** The memory service of a data directory `home` whose default user's `memory.json` holds `doc`. */
export const holding = (home: string, doc: unknown) =>
  Effect.gen(function*() {
    const file = Path.join(home, "users", "default", "memory.json")
    Fs.mkdirSync(Path.dirname(file), { recursive: true })
    Fs.writeFileSync(file, JSON.stringify(doc))
    const context = yield* Layer.build(FileMemory.layer().pipe(
      Layer.provide(Layer.succeed(ModelService, ScriptedModel.make([]))),
      Layer.provide(MemoryThreadStore.layer()),
      Layer.provide(ConfigFile.layerFromObject({}, { home })),
      Layer.provide(NodeFileSystem.layer)
    ))
    return context.unsafeMap.get(Memory.key) as Memory["Type"]
  })
