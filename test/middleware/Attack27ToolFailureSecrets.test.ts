/**
 * Attack round 27 on a failing tool in a run given request secrets: SkillActivation masks the run's values in a tool's
 * result, but a tool that fails (a `ToolError`, a defect) passed its error through unmasked to ToolErrorHandling,
 * outside it, which writes the error's text into the result the model reads (its detail cut at 500 characters). A
 * tool failing with a message that says a value back (a library's HTTP tool quoting its request) had the value read by
 * the model whole, or its beginning where the cut fell.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import * as SkillActivation from "../../src/middleware/SkillActivation.js"
import * as ToolErrorHandling from "../../src/middleware/ToolErrorHandling.js"
import type { Registry } from "../../src/services/Skills.js"
import * as Tool from "../../src/services/Tool.js"
import * as M from "../../src/state/Message.js"
import * as H from "../support/harness.js"

const SECRET = "sk-erp-a27-0123456789abcdefghij"
const registry: Registry = {
  catalog: Effect.succeed({
    root: "/skills",
    container: "/mnt/skills",
    skills: [],
    rejected: [],
    shadowed: [],
    warnings: []
  }),
  read: () => Effect.succeed("")
}

// (fails, or dies, quoting its request: the value whole, and again where the detail's cut at 500 falls)
const failing = (name: string, how: "fail" | "die") =>
  Tool.make({
    name,
    description: `The ${name} tool.`,
    parameters: Schema.Struct({}),
    handler: (_, call) => {
      const error = new Error(`GET /report?token=${SECRET} refused; ${"x".repeat(420)} ${SECRET}`)
      return how === "fail" ? Effect.fail(Tool.failure(call, error)) : Effect.die(error)
    }
  })

describe("Attack27: a failing tool's error in a run given request secrets", () => {
  it.effect("the model reads the error, none of the value", () =>
    Effect.gen(function*() {
      const o = yield* H.run({
        input: "pull the report",
        tools: [failing("fetcher", "fail"), failing("crasher", "die")],
        script: [{ toolCalls: [{ name: "fetcher", args: {} }, { name: "crasher", args: {} }] }, "Done."],
        middlewares: () => [ToolErrorHandling.layer(), SkillActivation.layer({ registry })],
        options: { secrets: Redacted.make(new Map([["ERP_TOKEN", SECRET]])) }
      })
      const results = o.state.messages.filter((m) => m.type === "tool").map(M.text)
      assert.lengthOf(results, 2)
      for (const result of results) assert.include(result, "GET /report?token=[redacted] refused")
      const read = JSON.stringify(o.requests)
      assert.include(read, "GET /report?token=[redacted] refused")
      assert.notInclude(read, SECRET.slice(0, 8), "what the model read")
      assert.notInclude(JSON.stringify([o.events, o.state]), SECRET.slice(0, 8))
    }).pipe(H.withStore))
})
