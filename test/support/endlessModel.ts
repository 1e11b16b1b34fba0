/**
 * A hostile Chat Completions server for the streamed answer's bounds (AnswerSize.attack, Attack30StreamBounds): it
 * streams frames without end, up to 40 MB or until the client goes away, and says how much it sent and whether the
 * client closed the connection.
 */
import * as Effect from "effect/Effect"
import * as Http from "node:http"
import type * as Net from "node:net"

/** What the server sends at most. */
export const STREAM_BYTES = 40 * 1024 * 1024

/** The SSE frame of one chunk whose only choice has `delta`. */
export const chunk = (delta: unknown) =>
  `data: ${JSON.stringify({ id: "c", model: "m", choices: [{ index: 0, delta }] })}\n\n`

/** A server writing `frame(i)` until it has sent `STREAM_BYTES` or the client goes away (closed with the scope). */
export const endless = (frame: (i: number) => string) =>
  Effect.acquireRelease(
    Effect.async<{
      readonly url: string
      readonly sent: () => number
      readonly closed: () => boolean
      readonly server: Http.Server
    }>((resume) => {
      let sent = 0
      let closed = false
      const server = Http.createServer((req, res) => {
        req.resume()
        res.writeHead(200, { "content-type": "text/event-stream" })
        res.on("close", () => void (closed = true))
        let i = 0
        const write = () => {
          while (sent < STREAM_BYTES && !res.destroyed) {
            const text = frame(i++)
            sent += text.length
            if (!res.write(text)) return void res.once("drain", write)
          }
          if (!res.destroyed) res.end("\n\ndata: [DONE]\n\n")
        }
        write()
      })
      server.listen(0, "127.0.0.1", () => {
        const port = (server.address() as Net.AddressInfo).port
        resume(Effect.succeed({ url: `http://127.0.0.1:${port}/v1`, sent: () => sent, closed: () => closed, server }))
      })
    }),
    (started) => Effect.promise(() => new Promise<void>((done) => started.server.close(() => done())))
  )
