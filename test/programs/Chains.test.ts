/**
 * The lead and subagent orders as written in `Chains`: the names in order for the default configuration and
 * with every switch turned, every name of both lists making an entry of that name, and every ordering fact of
 * an entry naming an entry of each list the entry is in (a fact about a name no chain has would always hold,
 * silently).
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Schema from "effect/Schema"
import * as AllowlistGuardrail from "../../src/layers/AllowlistGuardrail.js"
import * as RbacAuthorization from "../../src/layers/RbacAuthorization.js"
import * as Chain from "../../src/middleware/Chain.js"
import * as Chains from "../../src/programs/Chains.js"
import type { AppConfig } from "../../src/services/AppConfig.js"
import { AppConfigSchema } from "../../src/services/AppConfig.js"
import type { Memory } from "../../src/services/Memory.js"

const configOf = (raw: Record<string, unknown> = {}): AppConfig => Schema.decodeUnknownSync(AppConfigSchema)(raw)

/** A memory that is on; the chains only hand it to their entries, which these tests never build. */
const memory: Memory["Type"] = {
  enabled: true,
  mode: "middleware",
  context: () => Effect.succeed(""),
  enqueue: () => Effect.void,
  flush: Effect.void,
  pending: Effect.succeed(0),
  load: () => Effect.die("unused"),
  clear: () => Effect.void,
  modify: () => Effect.die("unused"),
  under: () => memory,
  recall: () => Effect.void
}

const deferred: Chains.Deferred = {
  tools: [{ name: "mcp_query", description: "query", parameters: {} }],
  routes: [{ name: "mcp_query", priority: 1, keywords: ["sql"] }]
}

/** Role-based permissions (`authorization.enabled`): the Authorization entry, outside the Guardrail. */
const authorization = {
  provider: RbacAuthorization.make({ roles: { user: {} } }),
  failClosed: true,
  defaultRole: "user"
}

/** Every optional entry of the lead chain switched on. */
const leadAllOn = (): Chains.ChainOptions => ({
  config: configOf({ tool_progress: { enabled: true }, summarization: { enabled: true }, token_budget: { enabled: true } }),
  guardrail: AllowlistGuardrail.make({}),
  authorization,
  memory,
  planMode: true,
  vision: true,
  deferred,
  subagents: { runner: { types: [], run: () => Effect.die("unused") } }
})

/** Every optional entry of a subagent's chain switched on. */
const subagentAllOn = (): Chains.SubagentChainOptions => ({
  config: configOf({ tool_progress: { enabled: true }, summarization: { enabled: true } }),
  guardrail: AllowlistGuardrail.make({}),
  authorization,
  vision: true,
  deferred
})

const names = (order: ReadonlyArray<Chains.Item>) => order.map((item) => item.name)

describe("the lead order", () => {
  it("is the documented list: the default configuration's entries, and every switched entry in its place", () => {
    assert.deepStrictEqual(Chain.names(Chains.chain({ config: configOf() })), [
      "InputSanitization",
      "ToolOutputBudget",
      "ToolResultSanitization",
      "ThreadData",
      "Uploads",
      "Sandbox",
      "DanglingToolCall",
      "LLMErrorHandling",
      "SandboxAudit",
      "ReadBeforeWrite",
      "ToolErrorHandling",
      "DynamicContext",
      "SkillActivation",
      "SkillToolPolicy",
      "DurableContext",
      "TokenUsage",
      "Title",
      "SystemMessageCoalescing",
      "LoopDetection",
      "TerminalResponse",
      "ModelLengthFinishReason",
      "SafetyFinishReason",
      "ClarificationMiddleware"
    ])
    const all = Chains.chain(leadAllOn())
    assert.deepStrictEqual(Chain.names(all), [
      "InputSanitization",
      "ToolOutputBudget",
      "ToolResultSanitization",
      "ThreadData",
      "Uploads",
      "Sandbox",
      "DanglingToolCall",
      "LLMErrorHandling",
      "Authorization",
      "Guardrail",
      "SandboxAudit",
      "ReadBeforeWrite",
      "ToolProgress",
      "ToolErrorHandling",
      "DynamicContext",
      "SkillActivation",
      "SkillToolPolicy",
      "DurableContext",
      "Summarization",
      "Todo",
      "TokenUsage",
      "Title",
      "Memory",
      "ViewImage",
      "McpRouting",
      "DeferredToolFilter",
      "SystemMessageCoalescing",
      "SubagentLimit",
      "LoopDetection",
      "TokenBudget",
      "TerminalResponse",
      "ModelLengthFinishReason",
      "SafetyFinishReason",
      "ClarificationMiddleware"
    ])
    assert.deepStrictEqual(Chain.names(all), names(Chains.leadOrder), "every entry of the list switched on")
    assert.isTrue(Either.isRight(Chain.validate(all)))
  })

  it("an entry its configuration switches off is absent, not a pass-through (DeerFlow builds it only when on)", () => {
    const off = configOf({
      loop_detection: { enabled: false },
      token_usage: { enabled: false },
      safety_finish_reason: { enabled: false },
      summarization: { enabled: false },
      token_budget: { enabled: false }
    })
    const lead = Chain.names(Chains.chain({ config: off }))
    const subagent = Chain.names(Chains.subagentChain({ config: off, tokenBudget: off.token_budget }))
    for (const name of ["LoopDetection", "TokenUsage", "SafetyFinishReason", "Summarization", "TokenBudget"]) {
      assert.notInclude(lead, name)
      if (name !== "TokenUsage") assert.notInclude(subagent, name)
    }
    assert.isTrue(Either.isRight(Chain.validate(Chains.chain({ config: off }))))
    // switched on, each stands in its slot
    const on = Chain.names(Chains.chain({
      config: configOf({ summarization: { enabled: true }, token_budget: { enabled: true } })
    }))
    assert.deepStrictEqual(on.slice(on.indexOf("DurableContext"), on.indexOf("TokenUsage") + 1), [
      "DurableContext",
      "Summarization",
      "TokenUsage"
    ])
    assert.deepStrictEqual(on.slice(on.indexOf("LoopDetection"), on.indexOf("TokenBudget") + 2), [
      "LoopDetection",
      "TokenBudget",
      "TerminalResponse"
    ])
  })

  it("leaves out what the configuration switches off, and routing without keywords or a memory that is off", () => {
    const off = Chain.names(Chains.chain({
      config: configOf({ read_before_write: { enabled: false } }),
      deferred: { tools: deferred.tools },
      memory: { ...memory, enabled: false },
      planMode: false,
      vision: false
    }))
    for (const name of ["ReadBeforeWrite", "ToolProgress", "Guardrail", "McpRouting", "Memory", "Todo", "ViewImage"]) {
      assert.notInclude(off, name)
    }
    assert.include(off, "DeferredToolFilter")
    assert.notInclude(Chain.names(Chains.chain({ config: configOf(), deferred: { tools: [] } })), "DeferredToolFilter")
  })
})

describe("a subagent's order", () => {
  it("is the documented list: the default configuration's entries, and every switched entry in its place", () => {
    assert.deepStrictEqual(Chain.names(Chains.subagentChain({ config: configOf() })), [
      "InputSanitization",
      "ToolOutputBudget",
      "ToolResultSanitization",
      "ThreadData",
      "Sandbox",
      "DanglingToolCall",
      "LLMErrorHandling",
      "SandboxAudit",
      "ReadBeforeWrite",
      "ToolErrorHandling",
      "SkillActivation",
      "SkillToolPolicy",
      "LoopDetection",
      "TokenBudget",
      "SafetyFinishReason",
      "DurableContext",
      "SubagentDateContext",
      "SystemMessageCoalescing"
    ])
    const all = Chains.subagentChain(subagentAllOn())
    assert.deepStrictEqual(Chain.names(all), [
      "InputSanitization",
      "ToolOutputBudget",
      "ToolResultSanitization",
      "ThreadData",
      "Sandbox",
      "DanglingToolCall",
      "LLMErrorHandling",
      "Authorization",
      "Guardrail",
      "SandboxAudit",
      "ReadBeforeWrite",
      "ToolProgress",
      "ToolErrorHandling",
      "SkillActivation",
      "SkillToolPolicy",
      "ViewImage",
      "McpRouting",
      "DeferredToolFilter",
      "LoopDetection",
      "TokenBudget",
      "SafetyFinishReason",
      "DurableContext",
      "Summarization",
      "SubagentDateContext",
      "SystemMessageCoalescing"
    ])
    assert.deepStrictEqual(Chain.names(all), names(Chains.subagentOrder), "every entry of the list switched on")
    assert.isTrue(Either.isRight(Chain.validate(all)))
  })

  it("its entries are the lead chain's own: the same facts, only coalescing also stands innermost", () => {
    const lead = new Map(Chains.chain(leadAllOn()).map((e) => [e.name, e.facts]))
    for (const entry of Chains.subagentChain(subagentAllOn())) {
      if (entry.name === "SubagentDateContext") continue
      const facts = entry.name === "SystemMessageCoalescing" ? entry.facts.filter((f) => !("last" in f)) : entry.facts
      assert.deepStrictEqual(facts, lead.get(entry.name), entry.name)
    }
    const coalescing = Chains.subagentChain(subagentAllOn()).at(-1)!
    assert.isTrue(coalescing.facts.some((f) => "last" in f))
  })
})

describe("both orders", () => {
  it("every fact of an entry names an entry of each order the entry stands in", () => {
    const checks = [
      { order: Chains.leadOrder, chain: Chains.chain(leadAllOn()) },
      { order: Chains.subagentOrder, chain: Chains.subagentChain(subagentAllOn()) }
    ]
    for (const { chain, order } of checks) {
      const known = new Set<string>(names(order))
      for (const entry of chain) {
        for (const fact of entry.facts) {
          const named = "inside" in fact ? fact.inside : "outside" in fact ? fact.outside : undefined
          if (named !== undefined) assert.isTrue(known.has(named), `${entry.name}'s fact names ${named}, not in the order`)
        }
      }
    }
  })
})
