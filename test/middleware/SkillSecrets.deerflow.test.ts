/**
 * SkillActivation's binding of request-scoped secrets (DeerFlow's TestActivationBindsSecrets,
 * TestBashToolInjectsActiveSecrets, TestLeakSurfaces): the slash-activated skill's declared secret goes to the `bash`
 * calls of the run and to no other tool (a subagent's `task` gets none), only the declared names, and every request
 * value is masked in every tool result; the binding is one `skill_secrets` event of names.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import * as SkillActivation from "../../src/middleware/SkillActivation.js"
import * as SkillSecrets from "../../src/services/SkillSecrets.js"
import type { Catalog, Registry } from "../../src/services/Skills.js"
import * as Tool from "../../src/services/Tool.js"
import * as M from "../../src/state/Message.js"
import * as H from "../support/harness.js"

const SECRET = "sk-erp-9f3c-DO-NOT-LEAK"
const OTHER = "sk-undeclared-0000000"

const catalog: Catalog = {
  root: "/skills",
  container: "/mnt/skills",
  skills: [{
    name: "erp-report",
    description: "Pull an ERP report",
    category: "custom",
    relativePath: "erp-report",
    location: "/mnt/skills/custom/erp-report/SKILL.md",
    file: "/skills/custom/erp-report/SKILL.md",
    enabled: true,
    allowedTools: undefined,
    requiredSecrets: [{ name: "ERP_TOKEN", optional: false }]
  }],
  rejected: [],
  shadowed: [],
  warnings: []
}
const registry: Registry = {
  catalog: Effect.succeed(catalog),
  read: () => Effect.succeed("---\nname: erp-report\ndescription: Pull an ERP report\n---\n# ERP\n")
}

// a tool that says what it was given, and prints the request's values as a careless script would
const reporting = (name: string) =>
  Tool.make({
    name,
    description: `The ${name} tool.`,
    parameters: Schema.Struct({}),
    handler: () =>
      Effect.map(Effect.serviceOption(SkillSecrets.ActiveSecrets), (active) => {
        const env = Option.isSome(active) ? active.value.env : {}
        return `names=${Object.keys(env).join(",") || "none"} got=${env.ERP_TOKEN ?? ""} printed=${SECRET} ${OTHER}`
      })
  })

describe("SkillActivation binding request-scoped secrets", () => {
  it.effect("bash gets the declared secret, other tools none; every value is masked in results and events", () =>
    Effect.gen(function*() {
      const o = yield* H.run({
        input: "/erp-report pull it",
        tools: [reporting("bash"), reporting("task")],
        script: [{ toolCalls: [{ name: "bash", args: {} }, { name: "task", args: {} }] }, "Done."],
        middlewares: () => [SkillActivation.layer({ registry })],
        options: { secrets: Redacted.make(new Map([["ERP_TOKEN", SECRET], ["UNDECLARED", OTHER]])) }
      })
      assert.strictEqual(o.end.stop_reason, "completed")
      const results = o.state.messages.filter((m) => m.type === "tool").map(M.text)
      assert.deepStrictEqual(results, [
        "names=ERP_TOKEN got=[redacted] printed=[redacted] [redacted]",
        "names=none got= printed=[redacted] [redacted]"
      ])
      const all = JSON.stringify([o.events, o.requests, o.state])
      assert.notInclude(all, SECRET)
      assert.notInclude(all, OTHER)
      const bound = o.events.filter((e) => e.type === "custom" && e.name === "skill_secrets")
      assert.deepStrictEqual(bound.map((e) => (e as { data: unknown }).data), [
        { action: "bind_secrets", skills: ["erp-report"], secrets: ["ERP_TOKEN"], missing: {} }
      ])
    }).pipe(H.withStore))

  it.effect("without the skill in use, or without secrets, bash gets none and nothing is audited", () =>
    Effect.gen(function*() {
      for (const [input, secrets] of [["pull it", true], ["/erp-report pull it", false]] as const) {
        const o = yield* H.run({
          input,
          tools: [reporting("bash")],
          script: [{ toolCalls: [{ name: "bash", args: {} }] }, "Done."],
          middlewares: () => [SkillActivation.layer({ registry })],
          options: secrets ? { secrets: Redacted.make(new Map([["ERP_TOKEN", SECRET]])) } : {}
        })
        const result = M.text(o.state.messages.find((m) => m.type === "tool")!)
        assert.include(result, "names=none got= ")
        assert.isFalse(o.events.some((e) => e.type === "custom" && e.name === "skill_secrets"))
      }
    }).pipe(H.withStore))
})
