/**
 * The recording proxy: DeerFlow's Next server is pointed at it instead of at `antler serve`, and it passes every
 * request on unchanged (the Host and Origin headers included, so the gateway's checks see what they would see
 * without it) while it keeps a copy of each exchange: method, path, the headers that matter to the gateway, the
 * request body, the status, the response headers and the start of the response body (a streamed response is
 * passed on chunk by chunk as it comes). Each exchange is labelled with the flow being driven at the time.
 */
import * as Http from "node:http"
import type { AddressInfo } from "node:net"

/** How much of a request or response body is kept. */
const KEEP_BYTES = 512 * 1024

/** Request headers kept (what the gateway's checks and DeerFlow's auth read). */
const REQUEST_HEADERS = [
  "host",
  "origin",
  "referer",
  "content-type",
  "accept",
  "range",
  "last-event-id",
  "x-csrf-token",
  "x-api-key",
  "authorization",
  "cookie",
  "user-agent",
  "sec-fetch-site",
  "sec-fetch-mode"
] as const

/** Response headers kept. */
const RESPONSE_HEADERS = [
  "content-type",
  "content-range",
  "content-length",
  "content-disposition",
  "content-security-policy",
  "etag",
  "location",
  "set-cookie",
  "access-control-allow-origin",
  "access-control-allow-credentials"
] as const

/** One request the app (or Next's server on its behalf) made to the gateway, with its answer. */
export interface Exchange {
  readonly flow: string
  readonly seq: number
  readonly startedAt: number
  readonly method: string
  /** The path and query as the gateway received them. */
  readonly url: string
  readonly requestHeaders: Readonly<Record<string, string>>
  requestBody: Buffer
  status: number
  responseHeaders: Record<string, string>
  responseBody: Buffer
  /** The response was cut by the client or the proxy before its end (a stopped stream). */
  aborted: boolean
  /** The gateway could not be reached. */
  error?: string
  done: boolean
}

/** A running recorder. */
export interface Recorder {
  readonly url: string
  readonly ports: ReadonlyArray<number>
  readonly exchanges: ReadonlyArray<Exchange>
  /** Labels the exchanges that start from now on. */
  readonly setFlow: (flow: string) => void
  /** Sends the requests that start from now on to another gateway (`http://127.0.0.1:PORT`). */
  readonly setTarget: (target: string) => void
  /** Resolves when no exchange of the flow is still open, or after `timeoutMs`. */
  readonly settle: (timeoutMs: number) => Promise<void>
  readonly close: () => Promise<void>
}

const pick = (headers: Http.IncomingHttpHeaders, names: ReadonlyArray<string>): Record<string, string> => {
  const out: Record<string, string> = {}
  for (const name of names) {
    const value = headers[name]
    if (value === undefined) continue
    out[name] = Array.isArray(value) ? value.join("\n") : value
  }
  return out
}

const append = (kept: Buffer, chunk: Buffer): Buffer =>
  kept.length >= KEEP_BYTES ? kept : Buffer.concat([kept, chunk.subarray(0, KEEP_BYTES - kept.length)])

const listen = (server: Http.Server, port: number): Promise<number | undefined> =>
  new Promise((resolve) => {
    const onError = () => resolve(undefined)
    server.once("error", onError)
    server.listen(port, "127.0.0.1", () => {
      server.off("error", onError)
      resolve((server.address() as AddressInfo).port)
    })
  })

/**
 * Starts a recorder on 127.0.0.1 in front of `target` (`http://127.0.0.1:PORT`), on a free port and also on each
 * of `alsoPorts` that is free (DeerFlow's memory route calls 127.0.0.1:8001 whatever the app is told).
 */
export const start = async (target: string, alsoPorts: ReadonlyArray<number> = []): Promise<Recorder> => {
  let upstream = new URL(target)
  const exchanges: Array<Exchange> = []
  let flow = "startup"

  const handle = (req: Http.IncomingMessage, res: Http.ServerResponse) => {
    const exchange: Exchange = {
      flow,
      seq: exchanges.length,
      startedAt: Date.now(),
      method: req.method ?? "GET",
      url: req.url ?? "/",
      requestHeaders: pick(req.headers, REQUEST_HEADERS),
      requestBody: Buffer.alloc(0),
      status: 0,
      responseHeaders: {},
      responseBody: Buffer.alloc(0),
      aborted: false,
      done: false
    }
    exchanges.push(exchange)
    let requestBody: Buffer = Buffer.alloc(0)
    // Next's proxy names the address it was given (this recorder's) in Host; the gateway gets its own, as it would
    // if Next were pointed at it
    const headers = { ...req.headers }
    if (headers.host !== undefined && ports.some((port) => headers.host === `127.0.0.1:${port}`)) {
      headers.host = upstream.host
    }
    const forward = Http.request({
      host: upstream.hostname,
      port: upstream.port,
      method: req.method,
      path: req.url,
      headers
    }, (answer) => {
      exchange.status = answer.statusCode ?? 0
      exchange.responseHeaders = pick(answer.headers, RESPONSE_HEADERS)
      res.writeHead(answer.statusCode ?? 502, answer.rawHeaders)
      answer.on("data", (chunk: Buffer) => {
        exchange.responseBody = append(exchange.responseBody, chunk)
        res.write(chunk)
      })
      answer.on("end", () => {
        exchange.done = true
        res.end()
      })
      answer.on("error", () => {
        exchange.aborted = true
        exchange.done = true
        res.destroy()
      })
    })
    forward.on("error", (error) => {
      exchange.error = error.message
      exchange.done = true
      if (!res.headersSent) {
        res.writeHead(502, { "content-type": "application/json" })
        res.end(JSON.stringify({ detail: `recorder: the gateway is unreachable: ${error.message}` }))
      } else {
        res.destroy()
      }
    })
    req.on("data", (chunk: Buffer) => {
      requestBody = append(requestBody, chunk)
      forward.write(chunk)
    })
    req.on("end", () => {
      exchange.requestBody = requestBody
      forward.end()
    })
    res.on("close", () => {
      if (!exchange.done) {
        exchange.aborted = true
        exchange.done = true
        forward.destroy()
      }
    })
  }

  const servers: Array<Http.Server> = []
  const ports: Array<number> = []
  for (const port of [0, ...alsoPorts]) {
    const server = Http.createServer(handle)
    const bound = await listen(server, port)
    if (bound === undefined) continue
    servers.push(server)
    ports.push(bound)
  }

  return {
    url: `http://127.0.0.1:${ports[0]}`,
    ports,
    exchanges,
    setFlow: (name) => {
      flow = name
    },
    setTarget: (next) => {
      upstream = new URL(next)
    },
    settle: async (timeoutMs) => {
      const until = Date.now() + timeoutMs
      while (Date.now() < until && exchanges.some((e) => e.flow === flow && !e.done)) {
        await new Promise((resolve) => setTimeout(resolve, 100))
      }
    },
    close: async () => {
      await Promise.all(servers.map((server) =>
        new Promise<void>((resolve) => {
          server.closeAllConnections()
          server.close(() => resolve())
        })
      ))
    }
  }
}
