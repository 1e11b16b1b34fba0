/**
 * The gateway's own model calls (follow-up questions, input polish), as DeerFlow's one-shot model makes them: one
 * system instruction, one user message, no tools, thinking off, nothing of it in a thread.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as OneShot from "../../../src/programs/gateway/OneShot.js"
import type { ModelRequest } from "../../../src/services/ModelService.js"
import { ModelService } from "../../../src/services/ModelService.js"
import * as M from "../../../src/state/Message.js"

describe("one-shot model calls", () => {
  it.effect("are asked with thinking off, the named model, no tools, marked internal", () =>
    Effect.gen(function*() {
      const seen: Array<ModelRequest> = []
      const model = ModelService.of({
        generate: (request) => {
          seen.push(request)
          return Effect.succeed({ message: M.ai("Three questions."), finishReason: "stop" })
        }
      } as ModelService["Type"])
      const answer = yield* OneShot.text(model, {
        purpose: "suggestions",
        system: "Make follow-up questions.",
        user: "The tower is in Paris.",
        modelName: "small",
        userId: "alice"
      })
      assert.strictEqual(answer, "Three questions.")
      assert.strictEqual(seen.length, 1)
      assert.deepInclude(seen[0]!.settings, { modelName: "small", thinkingEnabled: false })
      assert.deepStrictEqual(seen[0]!.tools, [])
      assert.strictEqual(seen[0]!.internal, "suggestions")
    }))
})
