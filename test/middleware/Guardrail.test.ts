import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import * as AllowlistGuardrail from "../../src/layers/AllowlistGuardrail.js"
import * as GuardrailMiddleware from "../../src/middleware/Guardrail.js"
import * as RunJournal from "../../src/programs/gateway/RunJournal.js"
import * as Guardrail from "../../src/services/Guardrail.js"
import * as Tool from "../../src/services/Tool.js"
import * as M from "../../src/state/Message.js"
import * as H from "../support/harness.js"

/** Real tools that record that they ran. */
const tools = (runs: Array<string>) =>
  ["read_file", "bash"].map((name) =>
    Tool.make({
      name,
      description: name,
      parameters: Schema.Struct({ path: Schema.optional(Schema.String), command: Schema.optional(Schema.String) }),
      handler: () =>
        Effect.sync(() => {
          runs.push(name)
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

const toolMessages = (outcome: H.Outcome) => outcome.state.messages.filter((m): m is M.ToolMessage => m.type === "tool")
const guardrailEvents = (outcome: H.Outcome) =>
  outcome.events.flatMap((e) => (e.type === "custom" && e.name === "guardrail" ? [e.data as Record<string, any>] : []))

/** A provider that records the requests it was asked about and answers with `answer`. */
const recording = (
  answer: (request: Guardrail.GuardrailRequest) => Effect.Effect<Guardrail.GuardrailDecision, Guardrail.GuardrailError>
) => {
  const requests: Array<Guardrail.GuardrailRequest> = []
  const provider: Guardrail.Service = {
    name: "recording",
    evaluate: (request) => Effect.suspend(() => (requests.push(request), answer(request)))
  }
  return { provider, requests }
}

describe("Guardrail middleware", () => {
  it.effect("allowed calls run; a denied call does not, and the model reads the tool, code and reason", () =>
    Effect.gen(function*() {
      const runs: Array<string> = []
      const outcome = yield* H.run({
        script: twoCalls,
        tools: tools(runs),
        middlewares: () => [GuardrailMiddleware.layer()]
      }).pipe(Effect.provide(AllowlistGuardrail.layer({ denied_tools: ["bash"] })))
      assert.deepStrictEqual(runs, ["read_file"])
      const [read, bash] = toolMessages(outcome)
      assert.strictEqual(M.text(read!), "read_file ran")
      assert.strictEqual(bash!.status, "error")
      assert.strictEqual(bash!.name, "bash")
      assert.strictEqual(bash!.tool_call_id, "c2")
      const text = M.text(bash!)
      assert.match(text, /^Guardrail denied: /)
      assert.include(text, "'bash'")
      assert.include(text, "(oap.tool_not_allowed)")
      assert.include(text, "tool 'bash' is denied")
      // The denial is audited.
      const [event] = guardrailEvents(outcome)
      assert.deepInclude(event, {
        action: "deny_tool_call",
        tool_name: "bash",
        tool_call_id: "c2",
        allow: false,
        reason_codes: ["oap.tool_not_allowed"],
        provider_error: false
      })
      assert.strictEqual(outcome.end.status, "success")
    }).pipe(H.withStore))

  it.effect("the provider gets the call, the run and the caller's identity", () =>
    Effect.gen(function*() {
      const { provider, requests } = recording(() => Effect.succeed(Guardrail.allow))
      yield* H.run({
        script: twoCalls,
        tools: tools([]),
        options: {
          extra: { is_subagent: true, user_role: "admin", oauth_provider: "github", authz_attributes: { team: "x" } }
        },
        middlewares: () => [GuardrailMiddleware.layerWith(provider, { passport: "agent-7" })]
      })
      assert.strictEqual(requests.length, 2)
      const first = requests[0]!
      assert.deepInclude(first, {
        tool_name: "read_file",
        tool_input: { path: "/a" },
        agent_id: "agent-7",
        thread_id: "test-thread",
        tool_call_id: "c1",
        is_subagent: true,
        user_id: null,
        user_role: "admin",
        oauth_provider: "github",
        oauth_id: null,
        is_internal: false,
        authz_attributes: { team: "x" }
      })
      assert.isString(first.run_id)
      // The request is what the port's Schema says it is.
      assert.isTrue(Schema.is(Guardrail.GuardrailRequest)(first))
    }).pipe(H.withStore))

  it.effect("a run without an identity sends none: no invented user, empty attributes (as DeerFlow's)", () =>
    Effect.gen(function*() {
      const { provider, requests } = recording(() => Effect.succeed(Guardrail.allow))
      yield* H.run({
        script: twoCalls,
        tools: tools([]),
        middlewares: () => [GuardrailMiddleware.layerWith(provider, {})]
      })
      assert.deepInclude(requests[0]!, { user_id: null, user_role: null, authz_attributes: {} })
      assert.isTrue(Schema.is(Guardrail.GuardrailRequest)(requests[0]))
      // a run of a named user carries it
      const named = GuardrailMiddleware.buildRequest(
        { id: "c", name: "bash", args: {} },
        { threadId: "t", runId: "r", userId: "alice" },
        { user_id: "alice" },
        null,
        "2026-01-01T00:00:00.000Z"
      )
      assert.strictEqual(named.user_id, "alice")
    }).pipe(H.withStore))

  // DeerFlow's test_non_mapping_authz_attributes_raise_type_error: the call fails, the provider is not asked
  it.effect("authz_attributes that are not a mapping refuse the call instead of asking without them", () =>
    Effect.gen(function*() {
      const runs: Array<string> = []
      const { provider, requests } = recording(() => Effect.succeed(Guardrail.allow))
      const outcome = yield* H.run({
        script: [{ toolCalls: [{ name: "bash", args: { command: "ls" }, id: "c1" }] }, "done"],
        tools: tools(runs),
        options: { extra: { authz_attributes: ["not", "a", "mapping"] } },
        middlewares: () => [GuardrailMiddleware.layerWith(provider)]
      })
      assert.deepStrictEqual(runs, [])
      assert.lengthOf(requests, 0)
      const [message] = toolMessages(outcome)
      assert.strictEqual(message!.status, "error")
      assert.include(M.text(message!), "TypeError: authz_attributes must be a Mapping, got list")
    }).pipe(H.withStore))

  it.effect("fail closed (default): a failing provider denies with oap.evaluator_error", () =>
    Effect.gen(function*() {
      const runs: Array<string> = []
      const { provider } = recording(() =>
        Effect.fail(new Guardrail.GuardrailError({ provider: "opa", message: "connection refused" }))
      )
      const outcome = yield* H.run({
        script: twoCalls,
        tools: tools(runs),
        middlewares: () => [GuardrailMiddleware.layerWith(provider)]
      })
      assert.deepStrictEqual(runs, [])
      for (const message of toolMessages(outcome)) {
        assert.strictEqual(message.status, "error")
        assert.include(M.text(message), "(oap.evaluator_error)")
        assert.include(M.text(message), "Reason: guardrail provider error (fail-closed).")
        assert.notInclude(M.text(message), "connection refused")
      }
      const events = guardrailEvents(outcome)
      assert.strictEqual(events.length, 2)
      assert.deepInclude(events[0], { action: "deny_tool_call", provider_error: true, fail_closed: true })
    }).pipe(H.withStore))

  it.effect("fail open: a failing (even crashing) provider lets the call run, and says so in the audit", () =>
    Effect.gen(function*() {
      const runs: Array<string> = []
      let n = 0
      const { provider } = recording(() =>
        n++ === 0
          ? Effect.fail(new Guardrail.GuardrailError({ provider: "opa", message: "timeout" }))
          : Effect.die(new Error("provider bug"))
      )
      const outcome = yield* H.run({
        script: twoCalls,
        tools: tools(runs),
        middlewares: () => [GuardrailMiddleware.layerWith(provider, { failClosed: false })]
      })
      assert.deepStrictEqual(runs.sort(), ["bash", "read_file"])
      assert.deepStrictEqual(toolMessages(outcome).map((m) => m.status), ["success", "success"])
      const events = guardrailEvents(outcome)
      assert.deepStrictEqual(events.map((e) => [e.action, e.allow, e.reason_codes]), [
        ["allow_tool_call_after_provider_error", true, ["oap.evaluator_error"]],
        ["allow_tool_call_after_provider_error", true, ["oap.evaluator_error"]]
      ])
    }).pipe(H.withStore))

  it.effect("a denial without reasons uses DeerFlow's fallback reason, blocked by guardrail policy", () =>
    Effect.gen(function*() {
      const { provider } = recording(() => Effect.succeed({ allow: false, reasons: [] }))
      const outcome = yield* H.run({
        script: [{ toolCalls: [{ name: "bash", args: { command: "ls" } }] }, "done"],
        tools: tools([]),
        middlewares: () => [GuardrailMiddleware.layerWith(provider)]
      })
      const text = M.text(toolMessages(outcome)[0]!)
      assert.include(text, "(oap.denied)")
      assert.include(text, "blocked by guardrail policy")
    }).pipe(H.withStore))

  // DeerFlow's test_denied_tool_records_guardrail_event / test_fail_open_provider_error_records_guardrail_event...
  it.effect("the run journal keeps a middleware:guardrail record of each denial: no arguments, no identity", () =>
    Effect.gen(function*() {
      const { provider } = recording((request) =>
        Effect.succeed(
          request.tool_name === "bash"
            ? {
              allow: false,
              reasons: [{ code: "oap.denied", message: "all tools blocked" }, { code: "", message: "" }],
              policy_id: "test.deny.v1"
            }
            : Guardrail.allow
        )
      )
      const outcome = yield* H.run({
        script: [{ toolCalls: [{ name: "bash", args: { command: "cat secret.txt" }, id: "tool_call_1" }] }, "done"],
        tools: tools([]),
        middlewares: () => [GuardrailMiddleware.layerWith(provider, { passport: "agent_id" })],
        options: { extra: { user_id: "u-1", user_role: "user", oauth_provider: "github", oauth_id: "gh_1" } }
      })
      const journal = RunJournal.make(() => "2026-01-01T00:00:00.000Z")
      journal.push(outcome.events)
      const records = journal.events().filter((e) => e.event_type === "middleware:guardrail")
      assert.lengthOf(records, 1)
      assert.strictEqual(records[0]!.category, "middleware")
      assert.deepStrictEqual(records[0]!.content, {
        name: "GuardrailMiddleware",
        hook: "wrap_tool_call",
        action: "deny_tool_call",
        changes: {
          tool_name: "bash",
          tool_call_id: "tool_call_1",
          agent_id: "agent_id",
          is_subagent: false,
          user_role: "user",
          allow: false,
          policy_id: "test.deny.v1",
          reason_codes: ["oap.denied"],
          reason_messages: ["all tools blocked"],
          fail_closed: true,
          provider_error: false
        }
      })
      assert.notInclude(JSON.stringify(records), "secret.txt")
      assert.notInclude(JSON.stringify(records), "gh_1")
    }).pipe(H.withStore))

  it.effect("exempt tools are not sent to the provider", () =>
    Effect.gen(function*() {
      const runs: Array<string> = []
      const { provider, requests } = recording(() => Effect.succeed(Guardrail.deny("rbac.denied", "role may not")))
      yield* H.run({
        script: twoCalls,
        tools: tools(runs),
        middlewares: () => [GuardrailMiddleware.layerWith(provider, { exempt: ["read_file"] })]
      })
      assert.deepStrictEqual(runs, ["read_file"])
      assert.deepStrictEqual(requests.map((r) => r.tool_name), ["bash"])
    }).pipe(H.withStore))

  it.effect("two guardrails stack: the outer (authorization) decides first", () =>
    Effect.gen(function*() {
      const outer = recording(() => Effect.succeed(Guardrail.deny("rbac.denied", "role 'viewer' may not run bash")))
      const inner = recording(() => Effect.succeed(Guardrail.allow))
      const outcome = yield* H.run({
        script: [{ toolCalls: [{ name: "bash", args: { command: "ls" } }] }, "done"],
        tools: tools([]),
        middlewares: () => [
          GuardrailMiddleware.layerWith(outer.provider),
          GuardrailMiddleware.layer()
        ]
      }).pipe(Effect.provide(Layer.succeed(Guardrail.GuardrailProvider, inner.provider)))
      assert.include(M.text(toolMessages(outcome)[0]!), "(rbac.denied)")
      assert.strictEqual(inner.requests.length, 0)
    }).pipe(H.withStore))
})
