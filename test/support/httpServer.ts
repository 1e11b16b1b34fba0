/** A loopback HTTP server for tests that play a web page or a provider: it records every request it gets. */
import * as Http from "node:http"
import type { AddressInfo } from "node:net"
import * as Effect from "effect/Effect"

/** One request as the server received it. */
export interface Received {
  readonly method: string
  readonly url: string
  readonly headers: Http.IncomingHttpHeaders
  readonly body: string
}

/** A running server. */
export interface Server {
  /** `http://host:port` (no trailing slash). */
  readonly url: string
  readonly port: number
  readonly requests: ReadonlyArray<Received>
}

/** What the server answers to a request (`undefined`: never answer, the connection stays open). */
export type Handler = (request: Received, response: Http.ServerResponse) => void

/** Starts a server on `host` (default 127.0.0.1), a free port; it closes with the scope. */
export const start = (handler: Handler, host = "127.0.0.1") =>
  Effect.acquireRelease(
    Effect.async<{ server: Http.Server; info: Server }>((resume) => {
      const requests: Array<Received> = []
      const server = Http.createServer((req, res) => {
        const chunks: Array<Buffer> = []
        req.on("data", (chunk: Buffer) => chunks.push(chunk))
        req.on("end", () => {
          const received = {
            method: req.method ?? "",
            url: req.url ?? "",
            headers: req.headers,
            body: Buffer.concat(chunks).toString("utf8")
          }
          requests.push(received)
          handler(received, res)
        })
      })
      server.listen(0, host, () => {
        const port = (server.address() as AddressInfo).port
        resume(Effect.succeed({ server, info: { url: `http://${host}:${port}`, port, requests } }))
      })
    }),
    ({ server }) =>
      Effect.async<void>((resume) => {
        server.closeAllConnections()
        server.close(() => resume(Effect.void))
      })
  ).pipe(Effect.map(({ info }) => info))

/** Answers with a body and a content type. */
export const reply = (response: Http.ServerResponse, status: number, body: string, contentType = "text/html; charset=utf-8") => {
  response.writeHead(status, { "content-type": contentType })
  response.end(body)
}
