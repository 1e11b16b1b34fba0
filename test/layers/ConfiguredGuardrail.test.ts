/**
 * An operator's own guardrail provider (`guardrails.provider.use: ./provider.mjs:Export`, as DeerFlow loads any
 * class path there): real modules written to a temp dir, loaded through the decoded `config.yaml` section, asked
 * about the model's tool calls in a run through the Guardrail middleware. A provider that throws, hangs or answers
 * nonsense is a provider failure that `fail_closed` decides, never a crash.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as TestClock from "effect/TestClock"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as ConfiguredGuardrail from "../../src/layers/ConfiguredGuardrail.js"
import type { ChatRequestBody, Turn } from "../../src/layers/ScriptedChatServer.js"
import * as ScriptedChatServer from "../../src/layers/ScriptedChatServer.js"
import * as GuardrailMiddleware from "../../src/middleware/Guardrail.js"
import * as Chains from "../../src/programs/Chains.js"
import { AppConfigSchema, AppConfigService } from "../../src/services/AppConfig.js"
import * as Guardrail from "../../src/services/Guardrail.js"
import * as Tool from "../../src/services/Tool.js"
import * as M from "../../src/state/Message.js"
import { childEnv, runAntler } from "../support/cli.js"
import { tempDir } from "../support/fixtures.js"
import * as H from "../support/harness.js"
import { messageText } from "../support/modelRequests.js"

const PROVIDERS = `
// denies the tools named in its config, with its own code; counts what it was asked
export class ToolPolicy {
  constructor(config) {
    this.name = "tool-policy"
    this.blocked = config.blocked ?? []
    this.asked = []
    ToolPolicy.last = this
  }
  async evaluate(request) {
    this.asked.push(request)
    request.tool_input.command = "tampered"
    if (this.blocked.includes(request.tool_name)) {
      const reason = { code: "custom.blocked", message: request.tool_name + " is off limits" }
      return { allow: false, reasons: [reason], policy_id: "p1" }
    }
    return { allow: true, reasons: [{ code: "oap.allowed" }] }
  }
}
// a factory function, DeerFlow's aevaluate, no name of its own
export const viaFactory = (config) => ({ aevaluate: (request) => ({ allow: request.tool_name !== config.deny }) })
export const Throws = () => ({ evaluate: () => { throw new Error("policy service unreachable") } })
export const Rejects = () => ({ evaluate: () => Promise.reject(new Error("hosted evaluator said 503")) })
export const Hangs = () => ({ evaluate: () => new Promise(() => {}) })
export const Malformed = () => ({ evaluate: () => ({ allow: "yes" }) })
export const NotAProvider = () => ({ decide: () => true })
export const BrokenInit = class { constructor() { throw new Error("missing policy file") } }
`

const dir = tempDir("antler-guardrail-provider-")
Fs.writeFileSync(Path.join(dir, "providers.mjs"), PROVIDERS)

/** The guardrails section as `config.yaml` would give it, decoded as the loader does. */
const section = (value: unknown) => Schema.decodeUnknownSync(AppConfigSchema)({ guardrails: value }).guardrails

const provider = (use: string, config?: unknown, extra: Record<string, unknown> = {}) =>
  Effect.map(
    ConfiguredGuardrail.fromConfig(section({ enabled: true, provider: { use, config }, ...extra }), dir),
    (p) => p!
  )

/** Real tools that record that they ran, and with what. */
const tools = (runs: Array<string>) =>
  ["read_file", "bash"].map((name) =>
    Tool.make({
      name,
      description: name,
      parameters: Schema.Struct({ path: Schema.optional(Schema.String), command: Schema.optional(Schema.String) }),
      handler: (args) =>
        Effect.sync(() => {
          runs.push(`${name} ${args.command ?? args.path ?? ""}`.trim())
          return `${name} ran`
        })
    })
  )

const twoCalls = [
  {
    toolCalls: [
      { name: "read_file", args: { path: "/a" }, id: "c1" },
      { name: "bash", args: { command: "ls" }, id: "c2" }
    ]
  },
  "done"
]

const toolTexts = (outcome: H.Outcome) =>
  outcome.state.messages.flatMap((m) => (m.type === "tool" ? [`${m.status ?? "success"}: ${M.text(m)}`] : []))

const runWith = (guard: Guardrail.Service, failClosed: boolean, runs: Array<string>) =>
  H.run({
    script: twoCalls,
    tools: tools(runs),
    middlewares: () => [GuardrailMiddleware.layerWith(guard, { failClosed })]
  }).pipe(H.withStore)

describe("ConfiguredGuardrail: a provider module", () => {
  it.effect("denies and allows the model's calls in a run, with its config, its codes and its name", () =>
    Effect.gen(function*() {
      const guard = yield* provider("./providers.mjs:ToolPolicy", { blocked: ["bash"] })
      assert.strictEqual(guard.name, "tool-policy")
      const runs: Array<string> = []
      const outcome = yield* runWith(guard, true, runs)
      // the provider's own copy of the request was changed, not the call: read_file ran with its own args
      assert.deepStrictEqual(runs, ["read_file /a"])
      const [read, bash] = toolTexts(outcome)
      assert.strictEqual(read, "success: read_file ran")
      assert.include(bash, "error: Guardrail denied: tool 'bash' was blocked (custom.blocked). Reason: ")
      assert.include(bash, "bash is off limits")
      const audit = outcome.events.flatMap((e) => (e.type === "custom" && e.name === "guardrail" ? [e.data] : []))
      assert.deepInclude(audit[0] as object, { provider: "tool-policy", policy_id: "p1", provider_error: false })
      assert.strictEqual(outcome.end.status, "success")
    }))

  it.effect("the provider gets DeerFlow's request fields, identity included", () =>
    Effect.gen(function*() {
      const guard = yield* provider("./providers.mjs:ToolPolicy", {})
      const loaded = yield* Effect.promise(() => import(Path.join(dir, "providers.mjs")))
      yield* H.run({
        script: twoCalls,
        tools: tools([]),
        options: { extra: { user_role: "admin", oauth_id: "42", authz_attributes: { team: "x" } } },
        middlewares: () => [GuardrailMiddleware.layerWith(guard, { passport: "agent-7" })]
      }).pipe(H.withStore)
      const asked = loaded.ToolPolicy.last.asked as Array<Record<string, unknown>>
      assert.strictEqual(asked.length, 2)
      assert.deepInclude(asked[1], {
        tool_name: "bash",
        tool_call_id: "c2",
        agent_id: "agent-7",
        thread_id: "test-thread",
        user_role: "admin",
        oauth_id: "42",
        authz_attributes: { team: "x" }
      })
    }))

  it.effect("a factory function with DeerFlow's aevaluate, named by its export", () =>
    Effect.gen(function*() {
      const guard = yield* provider("./providers.mjs:viaFactory", { deny: "read_file" })
      assert.strictEqual(guard.name, "viaFactory")
      const runs: Array<string> = []
      const outcome = yield* runWith(guard, true, runs)
      assert.deepStrictEqual(runs, ["bash ls"])
      // a denial without reasons reads DeerFlow's defaults
      assert.include(toolTexts(outcome)[0], "(oap.denied). Reason: blocked by guardrail policy")
    }))

  for (const failClosed of [true, false]) {
    it.effect(`a provider that throws, rejects or answers nonsense: fail_closed ${failClosed}`, () =>
      Effect.gen(function*() {
        const cases = [
          ["Throws", "provider 'Throws' threw: policy service unreachable"],
          ["Rejects", "provider 'Rejects' threw: hosted evaluator said 503"],
          ["Malformed", "provider 'Malformed': its answer is not a decision"]
        ] as const
        for (const [name, why] of cases) {
          const guard = yield* provider(`./providers.mjs:${name}`, null, { fail_closed: failClosed })
          const runs: Array<string> = []
          const outcome = yield* runWith(guard, failClosed, runs)
          assert.strictEqual(outcome.end.status, "success", name)
          const texts = toolTexts(outcome)
          if (failClosed) {
            assert.deepStrictEqual(runs, [], name)
            assert.include(texts[1], "(oap.evaluator_error)", name)
            // DeerFlow's reason; the provider's own error is for the operator's log, not the model
            assert.include(texts[1], "Reason: guardrail provider error (fail-closed).", name)
            assert.notInclude(texts[1], why, name)
          } else {
            assert.deepStrictEqual([...runs].sort(), ["bash ls", "read_file /a"], name)
            assert.deepStrictEqual(texts, ["success: read_file ran", "success: bash ran"], name)
          }
          const audit = outcome.events.flatMap((e) => (e.type === "custom" && e.name === "guardrail" ? [e.data] : []))
          assert.deepInclude(audit[0] as object, {
            action: failClosed ? "deny_tool_call" : "allow_tool_call_after_provider_error",
            provider_error: true
          }, name)
        }
      }))

    it.effect(`a provider that never answers is cut off at timeout_seconds: fail_closed ${failClosed}`, () =>
      Effect.gen(function*() {
        const guard = yield* provider("./providers.mjs:Hangs", null, { timeout_seconds: 5 })
        const runs: Array<string> = []
        const fiber = yield* Effect.fork(runWith(guard, failClosed, runs))
        // the test clock moves on until the run ends: each call is cut off at its 5 seconds
        while (Option.isNone(yield* Fiber.poll(fiber))) yield* TestClock.adjust("1 second")
        const outcome = yield* Fiber.join(fiber)
        assert.strictEqual(outcome.end.status, "success")
        if (failClosed) {
          assert.deepStrictEqual(runs, [])
          // cut off, the call is refused with DeerFlow's reason (the timeout is in the operator's log)
          assert.include(toolTexts(outcome)[0], "(oap.evaluator_error). Reason: guardrail provider error (fail-closed)")
        } else {
          assert.deepStrictEqual([...runs].sort(), ["bash ls", "read_file /a"])
        }
      }))
  }

  it("decodeDecision fills DeerFlow's defaults and says what is wrong", () => {
    const ok = ConfiguredGuardrail.decodeDecision({ allow: false, reasons: [{ code: "x" }], policy_id: null })
    assert.deepStrictEqual(ok._tag === "Right" ? ok.right : undefined, {
      allow: false,
      reasons: [{ code: "x", message: "" }]
    })
    const bad = ConfiguredGuardrail.decodeDecision({ allow: true, reasons: [{ message: "m" }] })
    assert.strictEqual(bad._tag, "Left")
    assert.include(bad._tag === "Left" ? bad.left : "", "reasons.0.code")
    assert.strictEqual(ConfiguredGuardrail.decodeDecision(undefined)._tag, "Left")
  })
})

describe("ConfiguredGuardrail: configuration", () => {
  it.effect("DeerFlow's class path and the short names stay the built-in allowlist", () =>
    Effect.gen(function*() {
      for (const use of ["deerflow.guardrails.builtin:AllowlistProvider", "allowlist"]) {
        const guard = yield* provider(use, { denied_tools: ["bash"] })
        assert.strictEqual(guard.name, "allowlist", use)
      }
    }))

  it.effect("a provider that cannot be used is a config error naming it and why", () =>
    Effect.gen(function*() {
      const cases: ReadonlyArray<readonly [string, Guardrail.GuardrailConfigError["reason"], RegExp]> = [
        ["nope", "unknown_provider", /unknown provider 'nope'.*'allowlist'.*"\.\/my-provider\.mjs:MyProvider"/],
        [
          "my_company.guards:Strict",
          "module_not_found",
          /could not find the package "my_company\.guards".*a Python class path from a DeerFlow config cannot be loaded/
        ],
        ["./missing.mjs:X", "module_not_found", /no module at .*missing\.mjs/],
        ["./providers.mjs:Nope", "export_missing", /has no export named Nope \(its exports: BrokenInit, Hangs, /],
        ["./providers.mjs:NotAProvider", "not_provider", /is not a guardrail provider: it gave an object without/],
        ["./providers.mjs:BrokenInit", "init_failed", /failed when created: missing policy file/]
      ]
      for (const [use, reason, message] of cases) {
        const error = yield* Effect.flip(provider(use))
        assert.strictEqual(error._tag, "GuardrailConfigError", use)
        assert.strictEqual(error.reason, reason, use)
        assert.match(error.message, message, `${use}: ${error.message}`)
      }
    }))

  it.effect("guardrailOf reads a provider module from the folder of config.yaml; off is none", () =>
    Effect.gen(function*() {
      const config = Schema.decodeUnknownSync(AppConfigSchema)({
        guardrails: { enabled: true, provider: { use: "./providers.mjs:ToolPolicy", config: { blocked: ["bash"] } } }
      })
      const guard = yield* Chains.guardrailOf(config, dir)
      assert.strictEqual(guard?.name, "tool-policy")
      const off = Schema.decodeUnknownSync(AppConfigSchema)({ guardrails: { provider: { use: "./gone.mjs:X" } } })
      assert.isUndefined(yield* Chains.guardrailOf(off, dir))
    }))

  it.effect("layerFromConfig provides the configured provider, or fails with the config error", () =>
    Effect.gen(function*() {
      const withConfig = (value: unknown) =>
        Layer.succeed(AppConfigService, {
          config: Schema.decodeUnknownSync(AppConfigSchema)({ guardrails: value }),
          source: Path.join(dir, "config.yaml"),
          ignored: [],
          home: dir
        })
      const request = GuardrailMiddleware.buildRequest(
        { id: "c", name: "bash", args: {} },
        { threadId: "t", runId: "r", userId: "default" },
        undefined,
        null,
        "2026-01-01T00:00:00.000Z"
      )
      const fromModule = yield* Guardrail.GuardrailProvider.pipe(
        Effect.provide(ConfiguredGuardrail.layerFromConfig().pipe(
          Layer.provide(withConfig({ provider: { use: "./providers.mjs:ToolPolicy", config: { blocked: ["bash"] } } }))
        ))
      )
      assert.isFalse((yield* fromModule.evaluate(request)).allow)
      const builtin = yield* Guardrail.GuardrailProvider.pipe(
        Effect.provide(ConfiguredGuardrail.layerFromConfig().pipe(
          Layer.provide(withConfig({ provider: { use: "allowlist", config: { allowed_tools: [] } } }))
        ))
      )
      assert.isFalse((yield* builtin.evaluate(request)).allow)
      const failure = yield* Effect.flip(Guardrail.GuardrailProvider.pipe(
        Effect.provide(
          ConfiguredGuardrail.layerFromConfig().pipe(Layer.provide(withConfig({ provider: { use: "nope" } })))
        )
      ))
      assert.strictEqual(failure._tag, "GuardrailConfigError")
      const missing = yield* Effect.flip(Guardrail.GuardrailProvider.pipe(
        Effect.provide(ConfiguredGuardrail.layerFromConfig().pipe(Layer.provide(withConfig({ enabled: true }))))
      ))
      assert.include(missing.message, "no provider is configured")
    }))
})

const textOf = messageText

// Step 0 reads a file and lists the folder; step 1 repeats what the tools answered.
const script = (body: ChatRequestBody): Turn => {
  const results = body.messages.filter((m) => m.role === "tool")
  return results.length === 0
    ? {
      toolCalls: [
        { id: "r1", name: "read_file", arguments: { description: "read", path: "/mnt/user-data/workspace/notes.txt" } },
        { id: "l1", name: "ls", arguments: { description: "list", path: "/mnt/user-data/workspace" } }
      ]
    }
    : `The tools said: ${results.map(textOf).join(" | ")}`
}

describe("ConfiguredGuardrail: antler run", () => {
  it.live("a provider module beside config.yaml decides the model's calls: read_file refused, ls allowed", () =>
    Effect.scoped(Effect.gen(function*() {
      const server = yield* ScriptedChatServer.start(script)
      const home = tempDir("antler-guardrail-run-")
      Fs.writeFileSync(Path.join(home, "policy.mjs"), PROVIDERS)
      const config = Path.join(home, "config.yaml")
      Fs.writeFileSync(config, [
        "memory:",
        "  enabled: false",
        "guardrails:",
        "  enabled: true",
        "  provider:",
        "    use: ./policy.mjs:ToolPolicy",
        "    config:",
        "      blocked: [read_file]",
        ""
      ].join("\n"))
      const env = childEnv({ ANTLER_HOME: home, ANTLER_CONFIG: config })
      const ran = yield* Effect.promise(() =>
        runAntler(["run", "--base-url", server.url, "--api-key", "sk-guard", "look at my notes"], { cwd: home, env })
      )
      assert.strictEqual(ran.code, 0, ran.stderr)
      assert.include(
        ran.stdout,
        "The tools said: Guardrail denied: tool 'read_file' was blocked (custom.blocked). Reason: " +
          // ls ran: the workspace is empty
          "read_file is off limits. Choose an alternative approach. | (empty)"
      )
    })), 180_000)
})
