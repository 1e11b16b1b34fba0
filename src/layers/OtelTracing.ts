/**
 * OpenTelemetry tracing for an app that runs agents (the CLI, the gateway, a library user's program): the
 * `tracing` section of config.yaml, completed by OpenTelemetry's standard environment variables, as a layer
 * that installs the tracer (`layer`). `@effect/opentelemetry` and the exporters are optional peers, loaded only
 * when tracing is on.
 *
 * The environment, which wins over the file: `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (used as it is) or
 * `OTEL_EXPORTER_OTLP_ENDPOINT` (with `/v1/traces` added), `OTEL_EXPORTER_OTLP_HEADERS` /
 * `OTEL_EXPORTER_OTLP_TRACES_HEADERS` (`name=value,...`, values URL-encoded), `OTEL_SERVICE_NAME`,
 * `OTEL_TRACES_EXPORTER` (`otlp`, `console` or `none`) and `OTEL_SDK_DISABLED=true`. Setting an endpoint or an
 * exporter turns tracing on without the file. The `console` exporter writes one line per span to stderr, for a
 * quick look.
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import type { SpanExporter, SpanProcessor } from "@opentelemetry/sdk-trace-base"
import * as OptionalPackage from "../internal/OptionalPackage.js"
import type { TracingConfig } from "../services/AppConfig.js"

/**
 * A span processor: OpenTelemetry's `SpanProcessor` (e.g. `SimpleSpanProcessor` over an `InMemorySpanExporter`),
 * declared here so that Antler's types need no tracing package installed.
 */
export interface SpanProcessorLike {
  onStart(span: never, parentContext: never): void
  onEnd(span: never): void
  forceFlush(): Promise<void>
  shutdown(): Promise<void>
}

/** Where spans go. */
export type Exporter = "otlp" | "console"

/** What tracing does, once the file and the environment are read. */
export interface Settings {
  readonly enabled: boolean
  readonly exporter: Exporter
  /** The OTLP/HTTP traces endpoint. */
  readonly endpoint: string
  readonly serviceName: string
  /** Headers of the export requests: secrets. */
  readonly headers: Readonly<Record<string, Redacted.Redacted<string>>>
}

/** `name=value,name2=value2` (values URL-encoded), as OpenTelemetry's `*_HEADERS` variables hold them. */
export const parseHeaders = (text: string): Record<string, Redacted.Redacted<string>> => {
  const headers: Record<string, Redacted.Redacted<string>> = {}
  for (const pair of text.split(",")) {
    const equals = pair.indexOf("=")
    if (equals <= 0) continue
    const name = pair.slice(0, equals).trim()
    let value = pair.slice(equals + 1).trim()
    try {
      value = decodeURIComponent(value)
    } catch {
      // a value that is not URL-encoded is taken as it is
    }
    if (name !== "") headers[name] = Redacted.make(value)
  }
  return headers
}

const present = (value: string | undefined) => (value === undefined || value.trim() === "" ? undefined : value.trim())

/** The settings of a `tracing` section and an environment (`process.env` by default). */
export const settings = (config: TracingConfig, env: NodeJS.ProcessEnv = process.env): Settings => {
  const tracesEndpoint = present(env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT)
  const baseEndpoint = present(env.OTEL_EXPORTER_OTLP_ENDPOINT)
  const endpoint = tracesEndpoint ??
    (baseEndpoint === undefined ? undefined : `${baseEndpoint.replace(/\/+$/, "")}/v1/traces`)
  const chosen = present(env.OTEL_TRACES_EXPORTER)?.toLowerCase()
  const disabled = present(env.OTEL_SDK_DISABLED)?.toLowerCase() === "true" || chosen === "none"
  const exporter: Exporter = chosen === "console" ? "console" : chosen === "otlp" ? "otlp" : config.exporter
  return {
    enabled: !disabled && (config.enabled || endpoint !== undefined || chosen === "otlp" || chosen === "console"),
    exporter,
    endpoint: endpoint ?? config.otlp_endpoint,
    serviceName: present(env.OTEL_SERVICE_NAME) ?? config.service_name,
    headers: {
      ...config.headers,
      ...parseHeaders(env.OTEL_EXPORTER_OTLP_HEADERS ?? ""),
      ...parseHeaders(env.OTEL_EXPORTER_OTLP_TRACES_HEADERS ?? "")
    }
  }
}

/** The secrets of the settings (the export headers' values), for redaction. */
export const secrets = (settings: Settings): ReadonlyArray<string> =>
  Object.values(settings.headers).map(Redacted.value).filter((value) => value !== "")

/** One line per finished span on stderr: its trace, name, duration and attributes. */
const consoleExporter = (write: (line: string) => void): SpanExporter => ({
  export: (spans, done) => {
    for (const span of spans) {
      const [seconds, nanos] = span.duration
      const ms = (seconds * 1000 + nanos / 1e6).toFixed(1)
      const attributes = Object.keys(span.attributes).length === 0 ? "" : ` ${JSON.stringify(span.attributes)}`
      write(`trace ${span.spanContext().traceId.slice(0, 8)} ${span.name} ${ms} ms${attributes}\n`)
    }
    done({ code: 0 })
  },
  shutdown: () => Promise.resolve()
})

/**
 * The tracer of `settings` as a layer (spans flushed when it is released), or no layer when tracing is off.
 * `processor` sends spans elsewhere (tests), whatever the settings.
 */
export const layer = (
  settings: Settings,
  processor?: SpanProcessorLike
): Layer.Layer<never, OptionalPackage.MissingPackageError> => {
  if (processor === undefined && !settings.enabled) return Layer.empty
  const headers: Record<string, string> = {}
  for (const [name, value] of Object.entries(settings.headers)) headers[name] = Redacted.value(value)
  // the tracing packages are optional: a missing one fails the layer with a MissingPackageError naming it
  const optional = <A>(name: string, loader: () => Promise<A>) =>
    OptionalPackage.load([name], "export traces (tracing is on)", loader)
  return Layer.unwrapEffect(Effect.tryPromise({
    try: async () => {
      const NodeSdk = await optional("@effect/opentelemetry", () => import("@effect/opentelemetry/NodeSdk"))
      const spanProcessor = (processor as SpanProcessor | undefined) ?? await (async (): Promise<SpanProcessor> => {
        const { BatchSpanProcessor, SimpleSpanProcessor } = await optional(
          "@opentelemetry/sdk-trace-base",
          () => import("@opentelemetry/sdk-trace-base")
        )
        if (settings.exporter === "console") {
          return new SimpleSpanProcessor(consoleExporter((line) => process.stderr.write(line)))
        }
        const { OTLPTraceExporter } = await optional(
          "@opentelemetry/exporter-trace-otlp-http",
          () => import("@opentelemetry/exporter-trace-otlp-http")
        )
        return new BatchSpanProcessor(new OTLPTraceExporter({ url: settings.endpoint, headers }))
      })()
      const resource = { serviceName: settings.serviceName }
      return Layer.discard(NodeSdk.layer(() => ({ resource, spanProcessor })))
    },
    catch: (cause) => cause
  }).pipe(
    // a missing package is the caller's to report; anything else (a bug) stays a defect
    Effect.catchAll((cause) =>
      cause instanceof OptionalPackage.MissingPackageError ? Effect.fail(cause) : Effect.die(cause)
    )
  ))
}
