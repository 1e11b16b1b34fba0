/**
 * A loopback OTLP/HTTP traces receiver (JSON, as `@opentelemetry/exporter-trace-otlp-http` sends it) for tests of
 * processes that export their spans: it keeps every span it is sent, with its resource's attributes.
 */
import * as Http from "node:http"
import type { AddressInfo } from "node:net"

/** One span as received, its attributes made a record, with its resource's `service.name`. */
export interface ReceivedSpan {
  readonly name: string
  readonly traceId: string
  readonly spanId: string
  readonly parentSpanId: string | undefined
  readonly traceState: string | undefined
  readonly attributes: Readonly<Record<string, unknown>>
  readonly service: string | undefined
}

/** A running receiver: its base URL (`<url>/v1/traces` is where spans go), what it got, and how to stop it. */
export interface Receiver {
  readonly url: string
  readonly spans: () => ReadonlyArray<ReceivedSpan>
  readonly close: () => Promise<void>
}

const valueOf = (value: any): unknown =>
  value?.stringValue ?? value?.intValue ?? value?.doubleValue ?? value?.boolValue

const record = (attributes: ReadonlyArray<any> | undefined): Record<string, unknown> =>
  Object.fromEntries((attributes ?? []).map((a: any) => [a.key, valueOf(a.value)]))

/** Starts a receiver on a free loopback port. */
export const start = (): Promise<Receiver> =>
  new Promise((resolve) => {
    const spans: Array<ReceivedSpan> = []
    const server = Http.createServer((request, response) => {
      const chunks: Array<Buffer> = []
      request.on("data", (chunk: Buffer) => chunks.push(chunk))
      request.on("end", () => {
        if (request.url === "/v1/traces") {
          const body = JSON.parse(Buffer.concat(chunks).toString("utf8"))
          for (const rs of body.resourceSpans ?? []) {
            const service = record(rs.resource?.attributes)["service.name"]
            for (const ss of rs.scopeSpans ?? []) {
              for (const span of ss.spans ?? []) {
                spans.push({
                  name: span.name,
                  traceId: span.traceId,
                  spanId: span.spanId,
                  parentSpanId: span.parentSpanId || undefined,
                  traceState: span.traceState || undefined,
                  attributes: record(span.attributes),
                  service: typeof service === "string" ? service : undefined
                })
              }
            }
          }
        }
        response.writeHead(200, { "content-type": "application/json" }).end("{}")
      })
    })
    server.listen(0, "127.0.0.1", () =>
      resolve({
        url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
        spans: () => spans,
        close: () => new Promise<void>((done) => server.close(() => done()))
      }))
  })
