/**
 * Attack round 29 on Guardrail's cuts and one of the process's own secrets (a configured key: `ProcessSecrets`): a
 * provider's reason is kept in the audit record cut at 500 characters (streamed as the `guardrail` event, kept in the
 * run's journal), and a failing provider's error is logged cut at 2,000; neither was masked before its cut, and the
 * masks after it find whole values only. A provider (an operator's policy service) quoting the call's request where
 * the key fell at a cut had the key's beginning streamed, kept and logged.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as GuardrailMiddleware from "../../src/middleware/Guardrail.js"
import * as Guardrail from "../../src/services/Guardrail.js"
import { ProcessSecrets } from "../../src/services/ProcessSecrets.js"
import * as Tool from "../../src/services/Tool.js"
import * as Redact from "../../src/state/Redact.js"
import * as H from "../support/harness.js"
import { captureLogs } from "../support/logs.js"

const KEY = "sk-proc-a29-guard-0123456789abcdef"
const START = KEY.slice(0, 8)
const processSecrets = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.provideService(effect, ProcessSecrets, Redact.make([KEY]))

const fetcher = Tool.make({
  name: "fetcher",
  description: "The fetcher tool.",
  parameters: Schema.Struct({}),
  handler: () => Effect.succeed("fetched")
})

const provider = (
  evaluate: () => Effect.Effect<Guardrail.GuardrailDecision, Guardrail.GuardrailError>
): Guardrail.Service => ({ name: "policy", evaluate })

const run = (guard: Guardrail.Service) =>
  H.run({
    input: "pull the report",
    tools: [fetcher],
    script: [{ toolCalls: [{ name: "fetcher", args: {} }] }, "Done."],
    middlewares: () => [GuardrailMiddleware.layerWith(guard)]
  })

describe("Attack29: Guardrail's cuts inside one of the process's own secrets", () => {
  it.effect("a denial's reason (500): the audit event and the model say it, none of the key", () =>
    Effect.gen(function*() {
      // (the key 490 characters into the reason: its cut at 500 keeps 10 of it)
      const reason = `request refused: ${"x".repeat(473)}${KEY} is not allowed here`
      const o = yield* run(provider(() => Effect.succeed(Guardrail.deny("oap.denied", reason))))
      const [audit] = o.events.flatMap((e) => e.type === "custom" && e.name === "guardrail" ? [e.data as any] : [])
      assert.include(audit.reason_messages[0], "x[redacted]", "masked, then cut")
      assert.notInclude(JSON.stringify(o.events), START, "what is streamed")
      assert.notInclude(JSON.stringify(o.requests), START, "what the model read")
      assert.notInclude(JSON.stringify(o.state), START, "what is kept")
    }).pipe(processSecrets, H.withStore))

  it.effect("a failing provider's error (2,000): the log says it, none of the key", () =>
    Effect.gen(function*() {
      const { capture, logged } = captureLogs()
      // (the key 1,990 characters in: the log's cut at 2,000 keeps 10 of it)
      const message = `upstream said: ${"x".repeat(1975)}${KEY} is not allowed here`
      const o = yield* run(provider(() => Effect.fail(new Guardrail.GuardrailError({ provider: "policy", message }))))
        .pipe(Effect.provide(capture))
      const line = logged.find((l) => l.startsWith("guardrail: the provider failed"))
      assert.include(line, "x[redacted]", "masked, then cut")
      assert.notInclude(logged.join("\n"), START, "the log")
      assert.notInclude(JSON.stringify([o.events, o.state]), START, "what is streamed and kept")
    }).pipe(processSecrets, H.withStore))
})
