import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Schema from "effect/Schema"
import * as AllowlistGuardrail from "../../src/layers/AllowlistGuardrail.js"
import { AppConfigSchema } from "../../src/services/AppConfig.js"
import * as Guardrail from "../../src/services/Guardrail.js"

const request = (tool_name: string): Guardrail.GuardrailRequest => ({
  tool_name,
  tool_input: {},
  agent_id: null,
  thread_id: "t",
  run_id: "r",
  tool_call_id: "c",
  is_subagent: false,
  timestamp: new Date(0).toISOString(),
  user_id: "u",
  user_role: null,
  oauth_provider: null,
  oauth_id: null,
  channel_user_id: null,
  is_internal: false,
  authz_attributes: null
})

/** The guardrails section as `config.yaml` would give it, decoded like the real loader does. */
const guardrails = (section: unknown) => Schema.decodeUnknownSync(AppConfigSchema)({ guardrails: section }).guardrails

describe("AllowlistGuardrail", () => {
  it("decides by allowlist first, then denylist; no lists allow everything", () => {
    const code = (options: AllowlistGuardrail.AllowlistOptions, tool: string) => {
      const decision = AllowlistGuardrail.decide(options, tool)
      return decision.allow ? "allow" : decision.reasons[0]!.code
    }
    assert.strictEqual(code({}, "bash"), "allow")
    assert.strictEqual(code({ allowed_tools: ["read_file"] }, "read_file"), "allow")
    assert.strictEqual(code({ allowed_tools: ["read_file"] }, "bash"), Guardrail.TOOL_NOT_ALLOWED)
    assert.strictEqual(code({ allowed_tools: [] }, "read_file"), Guardrail.TOOL_NOT_ALLOWED)
    // DeerFlow's test_guardrail_middleware::test_denied_tools: a denylisted tool is oap.tool_not_allowed too
    assert.strictEqual(code({ denied_tools: ["bash", "write_file"] }, "bash"), "oap.tool_not_allowed")
    assert.strictEqual(code({ allowed_tools: ["bash"], denied_tools: ["bash"] }, "bash"), "oap.tool_not_allowed")
    assert.strictEqual(code({ allowed_tools: null, denied_tools: null }, "bash"), "allow")
  })

  it.effect("evaluates requests as a provider", () =>
    Effect.gen(function*() {
      const provider = AllowlistGuardrail.make({ allowed_tools: ["ls"] })
      assert.isTrue((yield* provider.evaluate(request("ls"))).allow)
      const denied = yield* provider.evaluate(request("bash"))
      assert.isFalse(denied.allow)
      assert.include(denied.reasons[0]!.message, "'bash'")
    }))

  it("maps DeerFlow's class path and the short names to the built-in provider", () => {
    for (const use of ["deerflow.guardrails.builtin:AllowlistProvider", "allowlist", "AllowlistProvider"]) {
      const resolved = AllowlistGuardrail.fromConfig(
        guardrails({ enabled: true, provider: { use, config: { denied_tools: ["bash"] } } })
      )
      assert.isTrue(Either.isRight(resolved), use)
      const provider = Either.getOrThrow(resolved)!
      assert.strictEqual(provider.name, "allowlist")
    }
    assert.isUndefined(Either.getOrThrow(AllowlistGuardrail.fromConfig(guardrails({ enabled: false }))))
  })

  it("an unknown provider or a bad config is a readable config error", () => {
    const unknown = AllowlistGuardrail.fromConfig(guardrails({ provider: { use: "mycompany.guards:OpaProvider" } }))
    assert.isTrue(Either.isLeft(unknown))
    const error = Either.flip(unknown).pipe(Either.getOrThrow)
    assert.strictEqual(error.reason, "unknown_provider")
    assert.include(error.message, "'mycompany.guards:OpaProvider'")
    assert.include(error.message, "'allowlist'")

    const bad = AllowlistGuardrail.fromConfig(
      guardrails({ provider: { use: "allowlist", config: { allowed_tools: "bash", denid_tools: ["x"] } } })
    )
    const badError = Either.flip(bad).pipe(Either.getOrThrow)
    assert.strictEqual(badError.reason, "invalid_config")
    assert.include(badError.message, "guardrails.provider.config.allowed_tools")
    assert.include(badError.message, "guardrails.provider.config.denid_tools")
  })
})
