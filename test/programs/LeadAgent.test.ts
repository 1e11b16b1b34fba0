/**
 * The lead agent as a service: its chain as checked data (names, declared ordering facts, a typed error for a
 * chain that breaks one), the order a request really takes through the built chain, and an app's own
 * middleware inserted by name.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import * as ConfigFile from "../../src/layers/ConfigFile.js"
import * as LocalSandbox from "../../src/layers/LocalSandbox.js"
import * as MemoryThreadStore from "../../src/layers/MemoryThreadStore.js"
import * as ScriptedModel from "../../src/layers/ScriptedModel.js"
import * as Chain from "../../src/middleware/Chain.js"
import * as MW from "../../src/middleware/Middleware.js"
import * as LeadAgent from "../../src/programs/LeadAgent.js"
import { defaults } from "../../src/services/AppConfig.js"
import type { ModelRequest } from "../../src/services/ModelService.js"
import { ModelService } from "../../src/services/ModelService.js"
import * as Tool from "../../src/services/Tool.js"
import { ThreadStore } from "../../src/services/ThreadStore.js"
import * as M from "../../src/state/Message.js"
import { tempDirs } from "../support/fixtures.js"

const tempDir = tempDirs()

/** The lead agent over a scripted model, an in-memory store, the local sandbox and a configuration. */
const agentLayer = (
  script: ScriptedModel.Script,
  options: LeadAgent.Options = {},
  config: unknown = {},
  store: Layer.Layer<ThreadStore> = MemoryThreadStore.layer()
) =>
  LeadAgent.layer({ sandboxTools: false, systemPrompt: "You are a test agent.", ...options }).pipe(
    Layer.provide(Layer.succeed(ModelService, ScriptedModel.make(script))),
    Layer.provide(Layer.merge(store, LocalSandbox.layer())),
    Layer.provide(ConfigFile.layerFromObject(config, { home: tempDir("antler-agent-") }))
  )

/** An in-memory store that counts how often a thread is loaded. */
const countingStore = (loads: { n: number }) =>
  Layer.sync(ThreadStore, () => {
    const inner = MemoryThreadStore.make()
    return ThreadStore.of({ ...inner, load: (id) => Effect.suspend(() => (loads.n++, inner.load(id))) })
  })

const buildAgent = (layer: ReturnType<typeof agentLayer>) =>
  Effect.map(Layer.build(layer), (context) => Context.get(context, LeadAgent.LeadAgent))

describe("the lead chain as data", () => {
  it("the library's order is the chain's names, and the chain validates (the order: Chains.test.ts)", () => {
    const chain = LeadAgent.chain({ config: defaults() })
    assert.deepStrictEqual(LeadAgent.order({ config: defaults() }), Chain.names(chain))
    assert.isTrue(Either.isRight(Chain.validate(chain)))
  })

  it("read_before_write and tool_progress switch their entries; tool progress stays outside error handling", () => {
    const config = { ...defaults(), read_before_write: { enabled: false } }
    assert.notInclude(LeadAgent.order({ config }), "ReadBeforeWrite")
    const progress = { ...defaults(), tool_progress: { ...defaults().tool_progress, enabled: true } }
    const order = LeadAgent.order({ config: progress })
    assert.deepStrictEqual(order.slice(order.indexOf("SandboxAudit"), order.indexOf("ToolErrorHandling") + 1), [
      "SandboxAudit",
      "ReadBeforeWrite",
      "ToolProgress",
      "ToolErrorHandling"
    ])
    const chain = LeadAgent.chain({ config: progress })
    const entry = chain.find((e) => e.name === "ToolProgress")!
    const moved = Either.getOrThrow(Chain.insert(
      Either.getOrThrow(Chain.drop(chain, "ToolProgress")),
      { after: "ToolErrorHandling" },
      entry
    ))
    const error = Either.getLeft(Chain.validate(moved)).pipe((o) => o._tag === "Some" ? o.value : assert.fail("valid"))
    assert.strictEqual(error.entry, "ToolProgress")
    assert.strictEqual(error.other, "ToolErrorHandling")
    assert.include(error.message, "deerflow_tool_meta")
  })

  it("a chain that breaks a declared fact is refused with both entries and the reason", () => {
    const chain = LeadAgent.chain({ config: defaults() })
    const safety = chain.find((e) => e.name === "SafetyFinishReason")!
    const moved = Either.getOrThrow(Chain.insert(
      Either.getOrThrow(Chain.drop(chain, "SafetyFinishReason")),
      { before: "LoopDetection" },
      safety
    ))
    const error = Either.getLeft(Chain.validate(moved)).pipe((o) => o._tag === "Some" ? o.value : assert.fail("valid"))
    assert.strictEqual(error._tag, "ChainError")
    assert.strictEqual(error.reason, "order")
    assert.strictEqual(error.entry, "SafetyFinishReason")
    assert.strictEqual(error.other, "LoopDetection")
    assert.include(error.message, "SafetyFinishReason must stand inside LoopDetection")
    assert.include(error.message, "never be counted as repeats")
  })

  it("positions, replacements and drops name entries; an unknown name or a duplicate is an error", () => {
    const chain = LeadAgent.chain({ config: defaults() })
    const mine = Chain.entry("Mine", () => MW.make({}))
    assert.strictEqual(Either.getLeft(Chain.insert(chain, { before: "Nope" }, mine)).pipe((o) => o._tag === "Some" && o.value.reason), "unknown_entry")
    const twice = Either.getOrThrow(Chain.insert(chain, { after: "Title" }, Chain.entry("Title", () => MW.make({}))))
    assert.strictEqual(Either.getLeft(Chain.validate(twice)).pipe((o) => o._tag === "Some" && o.value.reason), "duplicate")
    const last = Either.getOrThrow(Chain.insert(chain, { last: true }, mine))
    const broken = Either.getLeft(Chain.validate(last)).pipe((o) => o._tag === "Some" ? o.value : assert.fail("valid"))
    assert.strictEqual(broken.entry, "ClarificationMiddleware")
    assert.strictEqual(broken.other, "Mine")
    const dropped = Either.getOrThrow(Chain.drop(chain, "Title"))
    assert.notInclude(Chain.names(dropped), "Title")
    const replaced = Either.getOrThrow(Chain.replace(chain, "Title", mine))
    assert.strictEqual(Chain.names(replaced).indexOf("Mine"), Chain.names(chain).indexOf("Title"))
  })
})

describe("LeadAgent.layer", () => {
  // DeerFlow test_skill_describe.py::test_setup_enabled_with_skills / test_setup_empty_skills: with deferred skill
  // discovery, describe_skill is offered to an agent that has skills, and not to one that may use none
  it.scoped("with deferred skill discovery, describe_skill is offered only to an agent with a skill to describe", () =>
    Effect.gen(function*() {
      const skills = Path.join(Path.dirname(fileURLToPath(import.meta.url)), "../fixtures/deerflow/skills")
      const config = { skills: { path: skills, deferred_discovery: true } }
      const offered = (allowlist: ReadonlyArray<string> | undefined) =>
        Effect.gen(function*() {
          const seen: Array<ModelRequest> = []
          const agent = yield* buildAgent(agentLayer((r) => (seen.push(r), "ok"), { skills: allowlist }, config))
          yield* agent.turn({ threadId: `skills-${allowlist?.length ?? "all"}`, prompt: "Hello" })
          return seen[0]!.tools.map((t) => t.name)
        })
      assert.include(yield* offered(undefined), "describe_skill")
      assert.include(yield* offered(["deep-research"]), "describe_skill")
      assert.notInclude(yield* offered([]), "describe_skill")
    }))

  // DeerFlow test_create_deerflow_agent.py::test_tool_deduplication keeps the user's ask_clarification; Antler keeps
  // the chain's (its middleware answers the calls) and says so in agent.tools; an app's bash replaces the sandbox's
  it.scoped("an app's tool named as a chain's tool is replaced by it; one named as a sandbox tool replaces it", () =>
    Effect.gen(function*() {
      const own = (name: string) =>
        Tool.make({
          name,
          description: `The app's ${name}`,
          parameters: Schema.Struct({ question: Schema.optional(Schema.String) }),
          handler: () => Effect.succeed(`the app's ${name} ran`)
        })
      const seen: Array<ModelRequest> = []
      const agent = yield* buildAgent(agentLayer(
        [(request) => {
          seen.push(request)
          return { toolCalls: [{ name: "ask_clarification", args: { question: "Which?" } }] }
        }],
        { sandboxTools: true, tools: [own("ask_clarification"), own("bash")] }
      ))
      const end = yield* agent.turn({ threadId: "own-tools", prompt: "Pick one" })
      assert.strictEqual(end.status, "interrupted")
      const offered = (name: string) => seen[0]!.tools.filter((t) => t.name === name).map((t) => t.description)
      assert.lengthOf(offered("ask_clarification"), 1)
      assert.notStrictEqual(offered("ask_clarification")[0], "The app's ask_clarification")
      assert.deepStrictEqual(offered("bash"), ["The app's bash"])
      assert.deepStrictEqual(
        agent.tools.filter((t) => t.name === "ask_clarification" || t.name === "bash").map((t) => t.description).sort(),
        [...offered("ask_clarification"), ...offered("bash")].sort()
      )
    }))

  it.scoped("a misordered chain fails when the agent is built, with the typed error", () =>
    Effect.gen(function*() {
      const exit = yield* Effect.exit(buildAgent(agentLayer(["hi"], {
        chain: (chain) => Chain.insert(chain, { first: true }, Chain.entry("Outer", () => MW.make({})))
      })))
      assert.isTrue(Exit.isFailure(exit))
      const error = Exit.isFailure(exit) ? exit.cause : undefined
      assert.include(String(error), "ChainError")
      assert.include(String(error), "InputSanitization must stand first (outermost), but Outer is outside it")
    }))

  it.scoped("subagents without a SubagentRunner in the app fail when the agent is built, saying what to provide", () =>
    Effect.gen(function*() {
      const exit = yield* Effect.exit(buildAgent(agentLayer(["hi"], { subagents: { maxConcurrent: 2 } })))
      assert.isTrue(Exit.isFailure(exit))
      assert.include(String(Exit.isFailure(exit) ? exit.cause : ""), "provide Subagents.layer()")
    }))

  it.scoped("a request passes the real chain's entries in the declared order, and tool calls theirs", () =>
    Effect.gen(function*() {
      const trace: Array<string> = []
      const agent = yield* buildAgent(agentLayer(
        [{ toolCalls: [{ name: "ask_clarification", args: { question: "Which one?", clarification_type: "approach_choice" } }] }],
        { chain: (chain) => Either.right(Chain.traced(chain, (name, port) => trace.push(`${port}:${name}`))) }
      ))
      const end = yield* agent.turn({ threadId: "traced", prompt: "Pick one" })
      assert.strictEqual(end.status, "interrupted")
      const model = trace.filter((t) => t.startsWith("model:")).map((t) => t.slice(6))
      const tool = trace.filter((t) => t.startsWith("tool:")).map((t) => t.slice(5))
      assert.deepStrictEqual(model, agent.order)
      assert.deepStrictEqual(tool, agent.order)
    }))

  it.scoped("an app's own middleware inserted by name runs at its position: after retries, before the loop guard", () =>
    Effect.gen(function*() {
      const trace: Array<string> = []
      const seen: Array<ModelRequest> = []
      const audit = Chain.entry("RequestAudit", () =>
        MW.make({
          model: (request, next) => Effect.suspend(() => (seen.push(request), next(request)))
        }), [{ inside: "LLMErrorHandling", reason: "it must see every retry" }])
      const agent = yield* buildAgent(agentLayer(["Hello."], {
        chain: (chain) =>
          Either.map(Chain.insert(chain, { before: "LoopDetection" }, audit), (c) =>
            Chain.traced(c, (name, port) => port === "model" && trace.push(name)))
      }))
      const end = yield* agent.turn({ threadId: "audited", prompt: "Hi" })
      assert.strictEqual(end.status, "success")
      const at = agent.order.indexOf("RequestAudit")
      assert.strictEqual(agent.order[at + 1], "LoopDetection")
      assert.deepStrictEqual(trace, agent.order)
      // it saw the request as it was at its position: sanitised, coalesced, with the system prompt
      assert.strictEqual(seen.length, 1)
      assert.strictEqual(seen[0]!.systemPrompt, "You are a test agent.")
      assert.include(M.text(seen[0]!.messages.at(-1)!), "Hi")
    }))

  it.scoped("a turn that answers a pending question loads the thread once", () =>
    Effect.gen(function*() {
      const loads = { n: 0 }
      const agent = yield* buildAgent(agentLayer(
        [
          { toolCalls: [{ name: "ask_clarification", args: { question: "CSV or PDF?", clarification_type: "approach_choice", options: ["CSV", "PDF"] } }] },
          (request) => `You chose: ${M.text(request.messages.at(-1)!)}`
        ],
        {},
        {},
        countingStore(loads)
      ))
      assert.strictEqual((yield* agent.turn({ threadId: "q", prompt: "Export it" })).status, "interrupted")
      loads.n = 0
      const said: Array<string> = []
      const end = yield* agent.turn({ threadId: "q", prompt: "2" }, (event) => {
        if (event.type === "message" && event.message.type === "ai") said.push(M.text(event.message))
      })
      assert.strictEqual(end.status, "success")
      assert.strictEqual(loads.n, 1)
      assert.include(said[0]!, "PDF")
    }))

  it.scoped("a run's end carries that run's own token usage, from turn and from run's stream alike", () =>
    Effect.gen(function*() {
      const usage = (input: number, output: number) => ({
        input_tokens: input,
        output_tokens: output,
        total_tokens: input + output
      })
      const echo = Tool.make({
        name: "echo",
        description: "Says it back",
        parameters: Schema.Struct({ text: Schema.String }),
        handler: ({ text }) => Effect.succeed(text)
      })
      const agent = yield* buildAgent(agentLayer([
        { toolCalls: [{ name: "echo", args: { text: "hi" } }], usage: usage(100, 10) },
        { content: "Done.", usage: usage(120, 5) },
        { content: "Again.", usage: usage(200, 7) }
      ], { tools: [echo] }, { token_usage: { enabled: true } }))
      const first = yield* agent.turn({ threadId: "t", prompt: "echo hi" })
      assert.deepStrictEqual(first.usage, { total_input_tokens: 220, total_output_tokens: 15, total_tokens: 235 })
      // the second run counts its own call only, not the thread's total so far
      const events = yield* Stream.runCollect(agent.run({ threadId: "t", prompt: "again" }))
      const end = [...events].at(-1)!
      assert.strictEqual(end.type, "run_end")
      assert.deepStrictEqual(end.type === "run_end" ? end.usage : undefined, {
        total_input_tokens: 200,
        total_output_tokens: 7,
        total_tokens: 207
      })
    }))

  it.scoped("the agent is built once: its runs, on one thread or several, each see their own thread", () =>
    Effect.gen(function*() {
      const agent = yield* buildAgent(agentLayer((request) => `I saw ${request.messages.length} messages`))
      const said: Array<string> = []
      const turn = (threadId: string, prompt: string) =>
        agent.turn({ threadId, prompt }, (event) => {
          if (event.type === "message" && event.message.type === "ai") said.push(M.text(event.message))
        })
      const ends = yield* Effect.all([turn("a", "one"), turn("b", "two"), turn("a", "three")])
      assert.deepStrictEqual(ends.map((e) => e.status), ["success", "success", "success"])
      // a thread's first turn also carries its date reminder (a hidden message before the user's)
      assert.deepStrictEqual(said, ["I saw 2 messages", "I saw 2 messages", "I saw 4 messages"])
    }))
})
