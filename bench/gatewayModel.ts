/**
 * The model of `npm run bench:gateway`: a loopback Chat Completions server (127.0.0.1, a free port) that both
 * gateways reach through their own OpenAI clients. It decides from the request alone: the last user message
 * names the run (`bench run <id>`); while the run has made fewer than `toolSteps` tool calls since that message
 * it answers with one tool call (write_file, then read_file), else with an answer of `answerTokens` tokens,
 * streamed one chunk per token, `tokenIntervalMs` apart. Each token is unique (` r<id>t<i>`) and the time the
 * server wrote it is kept, so the client can tell what each token's trip through the gateway took.
 */
import * as Http from "node:http"
import type { AddressInfo } from "node:net"

export interface ModelOptions {
  readonly toolSteps: number
  readonly answerTokens: number
  readonly tokenIntervalMs: number
}

export interface ModelServer {
  readonly url: string
  /** When each token was written (performance.now()), by its text without the leading space. */
  readonly sent: Map<string, number>
  readonly requests: () => number
  readonly close: () => Promise<void>
}

export const NOTE = "The quick brown fox jumps over the lazy dog. ".repeat(4)
export const tokenOf = (run: string, i: number) => `r${run}t${i}`
/** A token in a streamed chunk's content (the chunk is exactly one token, with its leading space). */
export const TOKEN = /^ ?(r[A-Za-z0-9]+t\d+)$/

interface WireMessage {
  readonly role: string
  readonly content?: unknown
}

const textOf = (content: unknown): string =>
  typeof content === "string"
    ? content
    : Array.isArray(content)
    ? content.map((part) => (typeof part?.text === "string" ? part.text : "")).join("")
    : ""

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

export const startModel = (options: ModelOptions): Promise<ModelServer> => {
  const sent = new Map<string, number>()
  let requests = 0
  let ids = 0

  const handle = async (res: Http.ServerResponse, body: string) => {
    requests++
    const request = JSON.parse(body) as { messages: ReadonlyArray<WireMessage>; stream?: boolean; model?: string }
    const messages = request.messages
    let at = -1
    for (let i = messages.length - 1; i >= 0; i--) {
      if (messages[i]!.role === "user") {
        at = i
        break
      }
    }
    const run = /bench run ([A-Za-z0-9]+)/.exec(at >= 0 ? textOf(messages[at]!.content) : "")?.[1]
    let done = 0
    for (let i = at + 1; i < messages.length; i++) if (messages[i]!.role === "tool") done++
    const id = `chatcmpl-${++ids}`
    const created = Math.floor(Date.now() / 1000)
    const frame = (delta: object, finish: string | null = null) =>
      `data: ${
        JSON.stringify({
          id,
          object: "chat.completion.chunk",
          created,
          model: request.model ?? "scripted",
          choices: [{ index: 0, delta, finish_reason: finish }]
        })
      }\n\n`
    const toolCall = run !== undefined && done < options.toolSteps
      ? {
        index: 0,
        id: `call_${id}`,
        type: "function",
        function: {
          name: done % 2 === 0 ? "write_file" : "read_file",
          arguments: JSON.stringify(
            done % 2 === 0
              ? { description: "Save the note", path: `/mnt/user-data/workspace/note-${done}.md`, content: NOTE }
              : { description: "Read it back", path: `/mnt/user-data/workspace/note-${done - 1}.md` }
          )
        }
      }
      : undefined
    if (request.stream !== true) {
      const message = toolCall === undefined
        ? { role: "assistant", content: "A bench answer." }
        : { role: "assistant", content: null, tool_calls: [{ ...toolCall, index: undefined }] }
      res.writeHead(200, { "content-type": "application/json" })
      res.end(JSON.stringify({
        id,
        object: "chat.completion",
        created,
        model: request.model ?? "scripted",
        choices: [{ index: 0, message, finish_reason: toolCall === undefined ? "stop" : "tool_calls" }],
        usage: { prompt_tokens: 10, completion_tokens: 10, total_tokens: 20 }
      }))
      return
    }
    res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" })
    res.flushHeaders()
    res.write(frame({ role: "assistant", content: "" }))
    if (toolCall !== undefined) {
      res.write(frame({ tool_calls: [toolCall] }))
      res.write(frame({}, "tool_calls"))
    } else if (run === undefined) {
      res.write(frame({ content: "A bench answer." }))
      res.write(frame({}, "stop"))
    } else {
      for (let i = 0; i < options.answerTokens; i++) {
        if (options.tokenIntervalMs > 0) await sleep(options.tokenIntervalMs)
        if (res.destroyed) return
        const token = tokenOf(run, i)
        sent.set(token, performance.now())
        res.write(frame({ content: ` ${token}` }))
      }
      res.write(frame({}, "stop"))
    }
    res.write(
      `data: ${
        JSON.stringify({
          id,
          object: "chat.completion.chunk",
          created,
          model: request.model ?? "scripted",
          choices: [],
          usage: { prompt_tokens: 100, completion_tokens: options.answerTokens, total_tokens: 100 + options.answerTokens }
        })
      }\n\n`
    )
    res.end("data: [DONE]\n\n")
  }

  const server = Http.createServer((req, res) => {
    const chunks: Array<Buffer> = []
    req.on("data", (chunk: Buffer) => chunks.push(chunk))
    req.on("end", () => {
      if (req.method !== "POST" || !req.url?.endsWith("/chat/completions")) {
        res.writeHead(404, { "content-type": "application/json" })
        res.end(JSON.stringify({ error: { message: `no route ${req.method} ${req.url}` } }))
        return
      }
      handle(res, Buffer.concat(chunks).toString("utf8")).catch((error) => {
        if (!res.headersSent) res.writeHead(500, { "content-type": "application/json" })
        res.end(JSON.stringify({ error: { message: String(error) } }))
      })
    })
  })
  server.keepAliveTimeout = 60_000
  return new Promise((resolve) => {
    server.listen(0, "127.0.0.1", () => {
      const port = (server.address() as AddressInfo).port
      resolve({
        url: `http://127.0.0.1:${port}/v1`,
        sent,
        requests: () => requests,
        close: () =>
          new Promise<void>((done) => {
            server.closeAllConnections()
            server.close(() => done())
          })
      })
    })
  })
}
