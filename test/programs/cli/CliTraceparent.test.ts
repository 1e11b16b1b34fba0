/**
 * `antler run` started by a traced program (OpenTelemetry's environment carriers, `TRACEPARENT` and `TRACESTATE`):
 * its run's span, exported to a loopback OTLP/HTTP receiver, is a child of the span `TRACEPARENT` names, in its
 * trace, and the model requests carry the trace on; an invalid `TRACEPARENT` is ignored (the run a root of its own,
 * the command fine).
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as ScriptedChatServer from "../../../src/layers/ScriptedChatServer.js"
import { runAntler } from "../../support/cli.js"
import { tempDir } from "../../support/fixtures.js"
import * as Otlp from "../../support/otlp.js"
import { eventually } from "../../support/poll.js"

const TRACE = "0af7651916cd43dd8448eb211c80319c"
const SPAN = "b7ad6b7169203331"

/** `antler run "hi"` against `model`, its traces to `otlp`, with `env` on top of a clean environment. */
const antler = (model: string, otlp: string, env: Record<string, string>) =>
  Effect.promise(() => {
    const home = tempDir("antler-traceparent-")
    const base: NodeJS.ProcessEnv = {}
    for (const [key, value] of Object.entries(process.env)) {
      if (!/^(OTEL_|OPENAI_|ANTLER_|TRACE)/.test(key)) base[key] = value
    }
    const config = Path.join(home, "config.yaml")
    Fs.writeFileSync(config, "memory:\n  enabled: false\ntitle:\n  enabled: false\n")
    return runAntler(["run", "--base-url", model, "--api-key", "x", "hi", "--config", config], {
      cwd: home,
      env: { ...base, NO_COLOR: "1", ANTLER_HOME: home, OTEL_EXPORTER_OTLP_ENDPOINT: otlp, ...env }
    })
  })

describe("antler run under a TRACEPARENT", () => {
  it.live("joins the trace it names; an invalid one is ignored", () =>
    Effect.scoped(Effect.gen(function*() {
      const model = yield* ScriptedChatServer.start(["hello", "hello"])
      const otlp = yield* Effect.acquireRelease(Effect.promise(Otlp.start), (r) => Effect.promise(r.close))
      const joined = yield* antler(model.url, otlp.url, {
        TRACEPARENT: `00-${TRACE}-${SPAN}-01`,
        TRACESTATE: "congo=t61rcWkgMzE"
      })
      assert.strictEqual(joined.code, 0, joined.stderr)
      const root = yield* Effect.promise(() =>
        eventually(() => otlp.spans().find((s) => s.name === "antler.run"), "the run's span exported")
      )
      assert.strictEqual(root.traceId, TRACE)
      assert.strictEqual(root.parentSpanId, SPAN)
      assert.strictEqual(root.traceState, "congo=t61rcWkgMzE")
      assert.match(model.headers[0]!.traceparent ?? "", new RegExp(`^00-${TRACE}-[0-9a-f]{16}-01$`))
      assert.strictEqual(model.headers[0]!.tracestate, "congo=t61rcWkgMzE")

      const ignored = yield* antler(model.url, otlp.url, { TRACEPARENT: `00-${TRACE.toUpperCase()}-${SPAN}-01` })
      assert.strictEqual(ignored.code, 0, ignored.stderr)
      const roots = yield* Effect.promise(() =>
        eventually(() => {
          const found = otlp.spans().filter((s) => s.name === "antler.run")
          return found.length === 2 ? found : undefined
        }, "the second run's span exported")
      )
      const second = roots.find((s) => s !== root)!
      assert.isUndefined(second.parentSpanId)
      assert.notStrictEqual(second.traceId.toLowerCase(), TRACE)
      assert.match(model.headers[1]!.traceparent ?? "", new RegExp(`^00-${second.traceId}-[0-9a-f]{16}-01$`))
      assert.notProperty(model.headers[1]!, "tracestate")
    })), 180_000)
})
