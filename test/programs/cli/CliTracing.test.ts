/**
 * `antler run` traced as a user sets it up: OpenTelemetry's standard variables (`OTEL_EXPORTER_OTLP_ENDPOINT`,
 * `OTEL_EXPORTER_OTLP_HEADERS`, `OTEL_SERVICE_NAME`) send the run's trace to a loopback OTLP/HTTP receiver (one
 * `antler.run` root with the model and tool calls under it, the header's secret never printed);
 * `OTEL_TRACES_EXPORTER=console` writes a line per span on stderr; without either nothing is traced.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Fs from "node:fs"
import * as Http from "node:http"
import type { AddressInfo } from "node:net"
import * as Path from "node:path"
import * as ScriptedChatServer from "../../../src/layers/ScriptedChatServer.js"
import * as OtelTracing from "../../../src/layers/OtelTracing.js"
import { runAntler } from "../../support/cli.js"
import { tempDir } from "../../support/fixtures.js"
import * as Redacted from "effect/Redacted"

const SLOW = 180_000

/** A scripted model that writes a file, then answers. */
const script: ScriptedChatServer.Script = (body) =>
  body.messages.at(-1)?.role === "tool"
    ? "Done."
    : { toolCalls: [{ name: "write_file", arguments: { path: "/mnt/user-data/workspace/a.md", content: "a" } }] }

interface Received {
  readonly headers: Http.IncomingHttpHeaders
  readonly body: any
}

/** A loopback OTLP/HTTP traces receiver (JSON), keeping what it is sent. */
const receiver = Effect.acquireRelease(
  Effect.async<{ readonly url: string; readonly received: Array<Received>; readonly server: Http.Server }>((resume) => {
    const received: Array<Received> = []
    const server = Http.createServer((request, response) => {
      const chunks: Array<Buffer> = []
      request.on("data", (chunk: Buffer) => chunks.push(chunk))
      request.on("end", () => {
        if (request.url === "/v1/traces") {
          received.push({ headers: request.headers, body: JSON.parse(Buffer.concat(chunks).toString("utf8")) })
        }
        response.writeHead(200, { "content-type": "application/json" }).end("{}")
      })
    })
    server.listen(0, "127.0.0.1", () =>
      resume(Effect.succeed({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, received, server })))
  }),
  ({ server }) =>
    Effect.async<void>((resume) => {
      server.close(() => resume(Effect.void))
    })
)

const antler = (home: string, args: ReadonlyArray<string>, env: Record<string, string>) =>
  Effect.promise(() => {
    const base: NodeJS.ProcessEnv = {}
    for (const [key, value] of Object.entries(process.env)) {
      if (!key.startsWith("OTEL_") && !key.startsWith("OPENAI_") && !key.startsWith("ANTLER_")) base[key] = value
    }
    const config = Path.join(home, "config.yaml")
    Fs.writeFileSync(config, "memory:\n  enabled: false\ntitle:\n  enabled: false\n")
    return runAntler([...args, "--config", config], { cwd: home, env: { ...base, NO_COLOR: "1", ANTLER_HOME: home, ...env } })
  })

const spansOf = (received: ReadonlyArray<Received>) =>
  received.flatMap((r) =>
    (r.body.resourceSpans ?? []).flatMap((rs: any) =>
      (rs.scopeSpans ?? []).flatMap((ss: any) =>
        (ss.spans ?? []).map((span: any) => ({ ...span, resource: rs.resource }))
      )
    )
  )

describe("antler run, traced", () => {
  it.live("the standard OTEL_ variables send the run's trace to an OTLP receiver", () =>
    Effect.scoped(Effect.gen(function*() {
      const home = tempDir("antler-trace-")
      const model = yield* ScriptedChatServer.start(script)
      const otlp = yield* receiver
      const run = yield* antler(home, ["run", "--base-url", model.url, "--api-key", "x", "write a"], {
        OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url,
        OTEL_EXPORTER_OTLP_HEADERS: "x-honeycomb-team=s3cr3t%2Dkey",
        OTEL_SERVICE_NAME: "antler-cli-test",
        // DeerFlow tags a trace with its environment (`env:production`); OpenTelemetry's way is a resource attribute
        OTEL_RESOURCE_ATTRIBUTES: "deployment.environment=production"
      })
      assert.strictEqual(run.code, 0, run.stderr)
      assert.notInclude(run.stdout + run.stderr, "s3cr3t-key")
      assert.isAbove(otlp.received.length, 0, "nothing was exported")
      assert.strictEqual(otlp.received[0]!.headers["x-honeycomb-team"], "s3cr3t-key")
      const spans = spansOf(otlp.received)
      const roots = spans.filter((span: any) => span.name === "antler.run")
      assert.strictEqual(roots.length, 1)
      const root = roots[0]!
      assert.isUndefined(root.parentSpanId || undefined)
      // as DeerFlow's trace metadata (test_tracing_metadata.py): the thread, the user (the CLI's, `default`), the
      // agent the trace is named after and the model
      const attributes = Object.fromEntries(root.attributes.map((a: any) => [a.key, a.value.stringValue]))
      assert.match(attributes["antler.thread_id"], /\S/)
      assert.strictEqual(attributes["antler.user_id"], "default")
      assert.strictEqual(attributes["antler.agent_name"], "lead_agent")
      assert.isString(attributes["gen_ai.request.model"])
      const service = root.resource.attributes.find((a: any) => a.key === "service.name")
      assert.strictEqual(service.value.stringValue, "antler-cli-test")
      const environment = root.resource.attributes.find((a: any) => a.key === "deployment.environment")
      assert.strictEqual(environment?.value.stringValue, "production")
      const trace = spans.filter((span: any) => span.traceId === root.traceId)
      assert.isAtLeast(trace.filter((span: any) => span.name === "OpenAiModel.generate").length, 2)
      assert.strictEqual(trace.filter((span: any) => span.name === "Tool.call").length, 1)
    })), SLOW)

  it.live("OTEL_TRACES_EXPORTER=console prints a line per span on stderr; unset, nothing is traced", () =>
    Effect.scoped(Effect.gen(function*() {
      const home = tempDir("antler-trace-console-")
      const model = yield* ScriptedChatServer.start(["hello", "hello"])
      const traced = yield* antler(home, ["run", "--base-url", model.url, "--api-key", "x", "hi"], {
        OTEL_TRACES_EXPORTER: "console"
      })
      assert.strictEqual(traced.code, 0, traced.stderr)
      assert.match(traced.stderr, /^trace [0-9a-f]{8} antler\.run [0-9.]+ ms /m)
      assert.match(traced.stderr, /^trace [0-9a-f]{8} OpenAiModel\.generate [0-9.]+ ms /m)
      const plain = yield* antler(home, ["run", "--base-url", model.url, "--api-key", "x", "hi"], {})
      assert.strictEqual(plain.code, 0, plain.stderr)
      assert.notInclude(plain.stderr, "trace ")
    })), SLOW)

  it("settings: the environment wins over the file and turns tracing on; OTEL_SDK_DISABLED turns it off", () => {
    const file = {
      enabled: false,
      otlp_endpoint: "http://collector:4318/v1/traces",
      service_name: "antler",
      exporter: "otlp" as const,
      headers: {}
    }
    assert.isFalse(OtelTracing.settings(file, {}).enabled)
    const env = OtelTracing.settings(file, {
      OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:4318/",
      OTEL_EXPORTER_OTLP_HEADERS: "a=1, b = x%20y ,bad",
      OTEL_SERVICE_NAME: "svc"
    })
    assert.isTrue(env.enabled)
    assert.strictEqual(env.endpoint, "http://127.0.0.1:4318/v1/traces")
    assert.strictEqual(env.serviceName, "svc")
    assert.deepStrictEqual(Object.fromEntries(Object.entries(env.headers).map(([k, v]) => [k, Redacted.value(v)])), {
      a: "1",
      b: "x y"
    })
    assert.strictEqual(
      OtelTracing.settings(file, { OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "http://h:1/traces" }).endpoint,
      "http://h:1/traces"
    )
    assert.isFalse(OtelTracing.settings({ ...file, enabled: true }, { OTEL_SDK_DISABLED: "true" }).enabled)
  })
})
