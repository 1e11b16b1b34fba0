/**
 * Configured middlewares (DeerFlow's `extensions.middlewares`): an operator's own modules, loaded when the app
 * starts, standing where DeerFlow puts them (after TokenBudget's place: before the lead's terminal-response and
 * safety tail, before a subagent's SafetyFinishReason), and refused at start with an error naming the entry
 * when they cannot be used. The CLI tests run them for real: the model reads what the guard answered, the user
 * reads the stamped answer.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import type { ChatRequestBody, Turn } from "../../src/layers/ScriptedChatServer.js"
import * as ScriptedChatServer from "../../src/layers/ScriptedChatServer.js"
import * as Chain from "../../src/middleware/Chain.js"
import * as Chains from "../../src/programs/Chains.js"
import * as AppConfig from "../../src/services/AppConfig.js"
import * as ConfiguredMiddlewaresFile from "../../src/programs/ConfiguredMiddlewares.js"
import { ConfiguredMiddlewareError } from "../../src/programs/ConfiguredMiddlewares.js"
import { childEnv, runAntler } from "../support/cli.js"
import { tempDir } from "../support/fixtures.js"
import { messageText } from "../support/modelRequests.js"

const HERE = Path.dirname(fileURLToPath(import.meta.url))
const FIXTURES = Path.resolve(HERE, "../fixtures/configured-middlewares")
const GUARDS = Path.join(FIXTURES, "guards.mjs")
const SLOW = 180_000

const loadError = (entries: ReadonlyArray<string>) =>
  Effect.flip(ConfiguredMiddlewaresFile.load(entries, FIXTURES))

describe("configured middlewares: loading", () => {
  it.effect("entries load in order, named as configured (or by the entry a factory gives)", () =>
    Effect.gen(function*() {
      const entries = yield* ConfiguredMiddlewaresFile.load(
        ["./guards.mjs:DomainGuard", `${GUARDS}:AnswerStamp`, "./guards.mjs:NamedEntry"],
        FIXTURES
      )
      assert.deepStrictEqual(Chain.names(entries), ["./guards.mjs:DomainGuard", `${GUARDS}:AnswerStamp`, "NamedEntry"])
    }))

  it.effect("each way an entry cannot be used is refused with its reason, naming the entry", () =>
    Effect.gen(function*() {
      const cases: ReadonlyArray<readonly [string, ConfiguredMiddlewareError["reason"], RegExp]> = [
        ["guards.mjs", "format", /"guards\.mjs" is not a middleware path\. Write "module:Export"/],
        ["./guards.mjs:not-a-name", "format", /not a middleware path/],
        ["./missing.mjs:Guard", "module_not_found", /no module at .*missing\.mjs/],
        ["definitely-missing-pkg/middlewares:Guard", "module_not_found", /could not find the package "definitely-missing-pkg\/middlewares".*npm install definitely-missing-pkg/],
        ["./broken.mjs:Guard", "import_failed", /importing .*broken\.mjs failed: broken module/],
        ["./guards.mjs:Nope", "export_missing", /has no export named Nope \(its exports: AnswerStamp, DomainGuard, /],
        ["./guards.mjs:NotAFactory", "not_middleware", /is not a middleware factory: the export is number/],
        ["./guards.mjs:GivesNothing", "not_middleware", /no "model", "tool" or "run" wrapper/],
        ["./guards.mjs:Throws", "init_failed", /failed when created: configured middleware init failed/],
        ["./guards.mjs:DomainGuard", "duplicate", /\(entry 2\) is named "\.\/guards\.mjs:DomainGuard", as entry 1/]
      ]
      for (const [entry, reason, message] of cases) {
        const error = yield* loadError(["./guards.mjs:DomainGuard", entry])
        assert.instanceOf(error, ConfiguredMiddlewareError, entry)
        assert.strictEqual(error.reason, reason, entry)
        assert.strictEqual(error.entry, entry)
        assert.match(error.message, message, `${entry}: ${error.message}`)
      }
    }))
})

describe("configured middlewares: their place in the chains", () => {
  const loaded = ConfiguredMiddlewaresFile.load(["./guards.mjs:DomainGuard", "./guards.mjs:AnswerStamp"], FIXTURES)
  const config = AppConfig.defaults()

  it.effect("lead: after the runtime middlewares, just outside TerminalResponse, in the order listed", () =>
    Effect.gen(function*() {
      const entries = yield* loaded
      const names = Chain.names(entries)
      const order = Chains.order({ config, configured: entries })
      const at = order.indexOf(names[0]!)
      assert.deepStrictEqual(order.slice(at - 1, at + 5), [
        "LoopDetection",
        ...names,
        "TerminalResponse",
        "ModelLengthFinishReason",
        "SafetyFinishReason"
      ])
      assert.strictEqual(order.at(-1), "ClarificationMiddleware")
      // with the token budget on, they stand inside it (DeerFlow's slot 32 follows slot 30)
      const budgeted = Chains.order({
        config: { ...config, token_budget: { ...config.token_budget, enabled: true } },
        configured: entries
      })
      const budget = budgeted.indexOf("TokenBudget")
      assert.deepStrictEqual(budgeted.slice(budget, budget + 4), ["TokenBudget", ...names, "TerminalResponse"])
      assert.isTrue(Either.isRight(Chain.validate(Chains.chain({ config, configured: entries }))))
    }))

  it.effect("subagent: after its token budget, just outside SafetyFinishReason", () =>
    Effect.gen(function*() {
      const entries = yield* loaded
      const order = Chain.names(Chains.subagentChain({ config, configured: entries }))
      const at = order.indexOf("TokenBudget")
      assert.deepStrictEqual(order.slice(at, at + 4), ["TokenBudget", ...Chain.names(entries), "SafetyFinishReason"])
    }))

  it("none configured: the chains are DeerFlow's orders as before", () => {
    assert.deepStrictEqual(Chains.order({ config, configured: [] }), Chains.order({ config }))
  })
})

const textOf = messageText

// Step 0 asks for bash; step 1 repeats what the tool answered.
const script = (body: ChatRequestBody): Turn => {
  const tool = body.messages.filter((m) => m.role === "tool").at(-1)
  return tool === undefined
    ? { toolCalls: [{ id: "b1", name: "bash", arguments: { description: "list", command: "ls" } }] }
    : `The tool said: ${textOf(tool)}`
}

describe("configured middlewares: antler run", () => {
  it.live("from config.yaml and from the extensions file: the guard answers the model, the answer is stamped", () =>
    Effect.scoped(Effect.gen(function*() {
      const server = yield* ScriptedChatServer.start(script)
      const model = ["--base-url", server.url, "--api-key", "sk-configured"]
      for (const where of ["config.yaml", "extensions_config.json"] as const) {
        const home = tempDir("antler-configured-")
        const config = Path.join(home, "config.yaml")
        const listed = [`${GUARDS}:DomainGuard`, `${GUARDS}:AnswerStamp`]
        if (where === "config.yaml") {
          Fs.writeFileSync(config, ["memory:", "  enabled: false", "extensions:", "  middlewares:", ...listed.map((l) => `    - ${l}`), ""].join("\n"))
        } else {
          Fs.writeFileSync(config, "memory:\n  enabled: false\n")
          Fs.writeFileSync(Path.join(home, "extensions_config.json"), JSON.stringify({ mcpServers: {}, middlewares: listed }))
        }
        const env = childEnv({ ANTLER_HOME: home, ANTLER_CONFIG: config })
        const ran = yield* Effect.promise(() => runAntler(["run", ...model, "list the files"], { cwd: home, env }))
        assert.strictEqual(ran.code, 0, `${where}: ${ran.stderr}`)
        assert.include(ran.stdout, "The tool said: DomainGuard refused bash [stamped]", where)
      }
    })), SLOW)

  it.live("a configured middleware that cannot be loaded stops the start with an error naming it", () =>
    Effect.gen(function*() {
      const home = tempDir("antler-configured-bad-")
      const config = Path.join(home, "config.yaml")
      Fs.writeFileSync(config, `memory:\n  enabled: false\nextensions:\n  middlewares:\n    - ${GUARDS}:Nope\n`)
      const env = childEnv({ ANTLER_HOME: home, ANTLER_CONFIG: config })
      const ran = yield* Effect.promise(() =>
        runAntler(["run", "--base-url", "http://127.0.0.1:9/v1", "--api-key", "x", "hi"], { cwd: home, env })
      )
      assert.strictEqual(ran.code, 2, "a configuration error")
      assert.include(ran.stderr, `Configuration error:\n${config}: extensions.middlewares: "${GUARDS}:Nope"`)
      assert.include(ran.stderr, "has no export named Nope")
      assert.notInclude(ran.stderr, "    at ", "no stack trace")
    }), SLOW)
})
