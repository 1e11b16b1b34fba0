/**
 * Safety detectors of the operator's own (`safety_finish_reason.detectors: [{ use: ./x.mjs:Export }]`, as DeerFlow
 * loads any class path there): real modules in a temp dir, loaded through the decoded config, guarding a run.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as ScriptedChatServer from "../../src/layers/ScriptedChatServer.js"
import * as SafetyDetectorModules from "../../src/middleware/SafetyDetectorModules.js"
import * as S from "../../src/middleware/SafetyFinishReason.js"
import { SafetyFinishReasonConfig } from "../../src/services/AppConfig.js"
import * as Tool from "../../src/services/Tool.js"
import { childEnv, runAntler } from "../support/cli.js"
import { tempDir } from "../support/fixtures.js"
import * as Harness from "../support/harness.js"

const DETECTORS = `
// an in-house gateway's finish reasons, from its config
export class GatewayFilter {
  constructor(config) { this.name = "gateway_filter"; this.values = config.values ?? [] }
  detect(message) {
    const value = message.response_metadata?.finish_reason
    message.tool_calls = []
    return this.values.includes(value)
      ? { reason_field: "finish_reason", reason_value: value, extras: { gateway: "in-house" } }
      : null
  }
}
export const Throws = () => ({ detect: () => { throw new Error("detector bug") } })
export const Nonsense = () => ({ detect: () => ({ reason_value: 7 }) })
export const Async = () => ({ detect: async () => ({ reason_field: "finish_reason", reason_value: "x" }) })
export const NotADetector = () => ({ check: () => null })
export const BrokenInit = class { constructor() { throw new Error("no rules file") } }
`

const dir = tempDir("antler-safety-detectors-")
Fs.writeFileSync(Path.join(dir, "detectors.mjs"), DETECTORS)

const config = (detectors: unknown) => Schema.decodeUnknownSync(SafetyFinishReasonConfig)({ detectors })
const load = (detectors: unknown) => SafetyDetectorModules.fromConfig(config(detectors), dir)

const guarded = (detectors: ReadonlyArray<S.Detector>, finishReason: string) =>
  Effect.gen(function*() {
    const ran: Array<string> = []
    const bash = Tool.make({
      name: "bash",
      description: "bash",
      parameters: Schema.Struct({ command: Schema.String }),
      handler: ({ command }) => Effect.sync(() => (ran.push(command), "ran"))
    })
    const out = yield* Harness.run({
      script: [{ toolCalls: [{ name: "bash", args: { command: "ls" } }], finishReason }, "done"],
      tools: [bash],
      middlewares: () => [S.layer({ detectors })]
    }).pipe(Harness.withStore)
    return { ran, out }
  })

describe("SafetyDetectorModules", () => {
  it.effect("a detector module beside the built-ins stops a flagged response; its tool call never runs", () =>
    Effect.gen(function*() {
      const detectors = (yield* load([
        { use: "openai_compatible_content_filter" },
        { use: "./detectors.mjs:GatewayFilter", config: { values: ["sensitive"] } }
      ]))!
      assert.deepStrictEqual(detectors.map((d) => d.name), ["openai_compatible_content_filter", "gateway_filter"])
      const flagged = yield* guarded(detectors, "sensitive")
      assert.deepStrictEqual(flagged.ran, [])
      assert.strictEqual(flagged.out.end.stop_reason, "safety_capped")
      const event = flagged.out.events.find((e) => e.type === "custom" && e.name === "safety_termination")
      assert.deepInclude((event as { data: object }).data, {
        detector: "gateway_filter",
        reason_value: "sensitive",
        extras: { gateway: "in-house" }
      })
      // its own copy of the message was changed, not the run's: an ordinary stop still runs the call
      const ordinary = yield* guarded(detectors, "tool_calls")
      assert.deepStrictEqual(ordinary.ran, ["ls"])
    }))

  it.effect("a detector that throws or answers nonsense (a promise included) is no hit: the run goes on", () =>
    Effect.gen(function*() {
      for (const name of ["Throws", "Nonsense", "Async"]) {
        const detectors = (yield* load([{ use: `./detectors.mjs:${name}` }]))!
        const { out, ran } = yield* guarded(detectors, "content_filter")
        assert.deepStrictEqual(ran, ["ls"], name)
        assert.strictEqual(out.end.status, "success", name)
      }
    }))

  it.effect("only built-ins, or the guard off: nothing is loaded here", () =>
    Effect.gen(function*() {
      assert.isUndefined(yield* load([{ use: "gemini_safety" }]))
      assert.isUndefined(yield* load(null))
      const off = Schema.decodeUnknownSync(SafetyFinishReasonConfig)({
        enabled: false,
        detectors: [{ use: "./gone.mjs:X" }]
      })
      assert.isUndefined(yield* SafetyDetectorModules.fromConfig(off, dir))
    }))

  it.effect("a detector that cannot be used is a config error naming the entry and why", () =>
    Effect.gen(function*() {
      const cases: ReadonlyArray<readonly [string, S.SafetyDetectorConfigError["reason"], RegExp]> = [
        ["./missing.mjs:X", "module_not_found", /detectors\[1\] \(use: "\.\/missing\.mjs:X"\): no module at .*missing/],
        ["./detectors.mjs:Nope", "export_missing", /has no export named Nope \(its exports: Async, BrokenInit/],
        ["./detectors.mjs:NotADetector", "not_detector", /did not give a safety detector/],
        ["./detectors.mjs:BrokenInit", "init_failed", /failed when created: no rules file/]
      ]
      for (const [use, reason, message] of cases) {
        const error = yield* Effect.flip(load([{ use: "anthropic_refusal" }, { use }]))
        assert.strictEqual(error.reason, reason, use)
        assert.match(error.message, message, `${use}: ${error.message}`)
      }
      // a Python class path that is no built-in stays unknown, and the error says how to bring your own
      const python = yield* Effect.flip(
        load([{ use: "./detectors.mjs:GatewayFilter" }, { use: "my_company.detectors:Custom" }])
      )
      assert.strictEqual(python.reason, "unknown_detector")
      assert.match(python.message, /detectors\[1\].*no such detector.*your own is a JavaScript module/)
    }))

  it.effect("SafetyFinishReason alone does not take a module entry for a built-in of the same name", () =>
    Effect.gen(function*() {
      const out = yield* Harness.run({
        script: ["hello"],
        middlewares: () => [S.layer({ config: config([{ use: "./x.mjs:GeminiSafetyDetector" }]) })]
      }).pipe(Harness.withStore)
      assert.strictEqual(out.end.status, "error")
      assert.include(out.end.error?.message ?? "", "a detector module is loaded when the agent is built")
    }))
})

describe("SafetyDetectorModules: antler run", () => {
  it.live("a detector module named in config.yaml: the user is told, write_file never runs", () =>
    Effect.scoped(Effect.gen(function*() {
      const server = yield* ScriptedChatServer.start([
        {
          toolCalls: [{
            name: "write_file",
            arguments: { description: "x", path: "/mnt/user-data/outputs/x.txt", content: "x" }
          }],
          finishReason: "sensitive"
        }
      ])
      const home = tempDir("antler-safety-run-")
      Fs.writeFileSync(Path.join(home, "detectors.mjs"), DETECTORS)
      const file = Path.join(home, "config.yaml")
      Fs.writeFileSync(file, [
        "memory:",
        "  enabled: false",
        "safety_finish_reason:",
        "  detectors:",
        "    - use: ./detectors.mjs:GatewayFilter",
        "      config:",
        "        values: [sensitive]",
        ""
      ].join("\n"))
      const env = childEnv({ ANTLER_HOME: home, ANTLER_CONFIG: file })
      const ran = yield* Effect.promise(() =>
        runAntler(["run", "--base-url", server.url, "--api-key", "sk-safety", "write x"], { cwd: home, env })
      )
      const signal = "safety-related signal (finish_reason='sensitive', detector='gateway_filter')"
      assert.include(ran.stdout, signal, ran.stderr)
      assert.include(ran.stdout, "Any tool calls produced in this turn were suppressed")
    })), 180_000)
})
