import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as MemoryThreadStore from "../../src/layers/MemoryThreadStore.js"
import * as ScriptedModel from "../../src/layers/ScriptedModel.js"
import * as Toolkit from "../../src/layers/Toolkit.js"
import * as Middleware from "../../src/middleware/Middleware.js"
import * as Run from "../../src/programs/Run.js"
import * as Tool from "../../src/services/Tool.js"
import type { RunEvent } from "../../src/services/RunEvents.js"
import * as M from "../../src/state/Message.js"

const echo = Tool.make({
  name: "echo",
  description: "Echo",
  parameters: Schema.Struct({ text: Schema.String }),
  handler: ({ text }) => Effect.succeed(`echo: ${text}`)
})

describe("smoke", () => {
  it.effect("runs a tool call and ends", () =>
    Effect.gen(function*() {
      const model = ScriptedModel.make([
        { toolCalls: [{ name: "echo", args: { text: "hi" } }] },
        "done"
      ])
      const events: Array<RunEvent> = []
      const end = yield* Run.execute(
        { threadId: "t1", input: [M.human("hello")] },
        () => Middleware.base(model, Toolkit.make([echo])),
        (e) => events.push(e)
      )
      assert.strictEqual(end.status, "success")
      assert.strictEqual(end.stop_reason, "completed")
      console.log(events.map((e) => e.type).join(","))
    }).pipe(Effect.provide(MemoryThreadStore.layer())))
})
