/**
 * Attack round 22 on roles in subagents (`authorization.enabled`): a subagent's `tool_search` catalog (the deferred
 * MCP tools its prompt names) is the parent run's role's, as the lead agent's is. Before, a subagent's prompt named
 * every deferred tool of its type, the ones the role may not see included (their call was refused, their name and
 * description were not hidden). The model is SCRIPTED (the scripted model service records its requests).
 */
import { assert, describe, it } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as ConfigFile from "../../src/layers/ConfigFile.js"
import * as LocalSandbox from "../../src/layers/LocalSandbox.js"
import * as ScriptedModel from "../../src/layers/ScriptedModel.js"
import * as Subagents from "../../src/programs/Subagents.js"
import { AppConfigService } from "../../src/services/AppConfig.js"
import * as Mcp from "../../src/services/Mcp.js"
import type { ModelRequest } from "../../src/services/ModelService.js"
import { ModelService } from "../../src/services/ModelService.js"
import { RunContext } from "../../src/services/RunContext.js"
import { SubagentRunner } from "../../src/services/SubagentRunner.js"
import { inRun, runContext, tempDirs } from "../support/fixtures.js"
import { rbac } from "../support/rbac.js"

const tempDir = tempDirs()

const mcp: Mcp.Service = {
  catalog: Effect.succeed({
    tools: ["calc_eval", "vault_read"].map((name) => ({
      server: name.split("_")[0]!,
      name,
      original: name.split("_")[1]!,
      description: `The ${name} tool.`,
      inputSchema: { type: "object", properties: {} },
      routing: { mode: "off" as const, priority: 0, keywords: [] }
    })),
    problems: []
  }),
  call: () => Effect.die("unused"),
  status: Effect.succeed([])
}

const authorization = rbac({ user: {}, guest: { tools: { allow: "*", deny: ["vault_read"] } } })

describe("a subagent's deferred tools are its parent run's role's", () => {
  it.scoped("a guest's subagent is never told of a deferred tool the guest may not see; a user's is", () =>
    Effect.gen(function*() {
      const seen: Array<ModelRequest> = []
      const app = yield* ConfigFile.fromObject(
        { tool_search: { enabled: true }, authorization },
        { home: tempDir("antler-attack22-subagents-") }
      )
      const config = Layer.succeed(AppConfigService, app)
      const services = Layer.mergeAll(
        config,
        Layer.succeed(ModelService, ScriptedModel.make((r) => (seen.push(r), "done"))),
        LocalSandbox.layer().pipe(Layer.provide(config)),
        Layer.succeed(Mcp.Mcp, mcp)
      )
      const runner = Context.get(
        yield* Layer.build(Subagents.layer({ bash: false }).pipe(Layer.provide(services))),
        SubagentRunner
      )
      const as = (role: string) => {
        const base = runContext("t1", `user-${role}`)
        const run = inRun()
        return Context.add(run.context, RunContext, {
          ...base,
          options: { ...base.options, extra: { user_role: role } }
        })
      }
      const request = (id: string) => ({
        toolCallId: id,
        description: id,
        prompt: `do ${id}`,
        subagentType: "general-purpose"
      })
      yield* runner.run(request("guest")).pipe(Effect.provide(as("guest")))
      const guest = seen.at(-1)!.systemPrompt!
      assert.include(guest, "<available-deferred-tools>\ncalc_eval\n</available-deferred-tools>")
      assert.notInclude(guest, "vault_read")
      yield* runner.run(request("user")).pipe(Effect.provide(as("user")))
      const user = seen.at(-1)!.systemPrompt!
      assert.include(user, "<available-deferred-tools>\ncalc_eval\nvault_read\n</available-deferred-tools>")
    }))
})
