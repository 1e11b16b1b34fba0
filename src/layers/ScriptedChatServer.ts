/**
 * A SCRIPTED Chat Completions server: a loopback HTTP server (127.0.0.1, a free port) that speaks OpenAI's
 * Chat Completions protocol, for the offline `antler demo` and for tests. The model behind it is a script,
 * not a model: each request gets the next scripted turn (text, reasoning, tool calls, an HTTP failure, a
 * failure in the middle of the stream, or a raw body), streamed as proper server-sent events. For tests of
 * hostile servers a turn may also be any raw body with any status and content type (an HTML page, a JSON
 * body where a stream was asked for), a stream cut in the middle, or no answer at all.
 */
import * as Http from "node:http"
import type { AddressInfo } from "node:net"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"

/** A scripted tool call. `arguments` is sent as is when a string (so it may be broken JSON on purpose). */
export interface ScriptedToolCall {
  readonly name: string
  readonly arguments: string | { readonly [key: string]: unknown }
  readonly id?: string
}

/** Token usage in the wire shape (`usage` of a completion). */
export interface WireUsage {
  readonly prompt_tokens: number
  readonly completion_tokens: number
  readonly total_tokens?: number
  readonly prompt_tokens_details?: { readonly [key: string]: unknown }
  readonly completion_tokens_details?: { readonly [key: string]: unknown }
}

/** A scripted answer. */
export interface Reply {
  readonly content?: string
  /** Sent as `reasoning_content` deltas before the content, as DeepSeek and vLLM do. */
  readonly reasoning?: string
  readonly toolCalls?: ReadonlyArray<ScriptedToolCall>
  /** Defaults to `tool_calls` when there are tool calls, else `stop`. */
  readonly finishReason?: string
  /**
   * Defaults to a rough count (4 characters a token) when the client asks for usage. Anything else (a
   * malformed `usage`, for hostile tests) is sent as is.
   */
  readonly usage?: WireUsage | unknown
  /** After the deltas, send an `error` event and end the stream (a provider failing mid-stream). */
  readonly streamError?: { readonly message: string; readonly type?: string; readonly code?: string }
  /** After the deltas, keep the connection open without finishing, until the client goes away. */
  readonly stall?: boolean
  /** After the deltas, destroy the connection without finishing (a connection dropped mid-answer). */
  readonly disconnect?: boolean
}

/** An HTTP failure. `body` defaults to an OpenAI-shaped error; a string body is sent as is. */
export interface Failure {
  readonly status: number
  readonly headers?: { readonly [name: string]: string }
  readonly body?: unknown
}

/**
 * A raw response body, by default sent as `text/event-stream` with status 200 (for malformed streams), else
 * with the given status, content type and headers (an HTML page, a non-streamed JSON body...).
 */
export interface Raw {
  readonly raw: string
  readonly status?: number
  readonly contentType?: string
  readonly headers?: { readonly [name: string]: string }
  /** Destroy the connection after writing the body instead of ending the response (a stream cut off). */
  readonly cut?: boolean
}

/** No answer at all: the request is read and the connection left open, without even headers. */
export interface Hang {
  readonly hang: true
}

/** One scripted turn. A plain string is a text reply. */
export type Turn = Reply | Failure | Raw | Hang | string

/**
 * The request body as received. Only `messages` (an array of objects with a `role`) is checked; everything
 * else is what the client sent, unvalidated.
 */
export interface ChatRequestBody {
  readonly model?: string
  readonly messages: ReadonlyArray<{ readonly role: string; readonly [key: string]: unknown }>
  readonly tools?: ReadonlyArray<unknown>
  readonly stream?: boolean | null
  readonly stream_options?: { readonly include_usage?: boolean | null } | null
  readonly [key: string]: unknown
}

/** A script: a list of turns served in order, or a function of the body and the call number (from 0). */
export type Script =
  | ReadonlyArray<Turn>
  | ((body: ChatRequestBody, callIndex: number) => Turn | undefined)

/** Server options. */
export interface Options {
  /** The model name reported in responses. Default `scripted`. */
  readonly model?: string
  /** Characters per content/argument delta. Default: content is split into words, arguments into 8 characters. */
  readonly chunkSize?: number
  /** A real pause between streamed chunks, in milliseconds. Default 0. */
  readonly delayMs?: number
  /** The loopback port to listen on. Default 0: a free one. */
  readonly port?: number
  /**
   * Whether the requests are kept (`requests`, `bodies`, `headers`) for a test to read. Default true; a server
   * that runs for long (`antler demo --model-server`) keeps only their count.
   */
  readonly remember?: boolean
}

/** A running scripted server. */
export interface ScriptedChatServer {
  /** The base URL, including `/v1` (what an OpenAI client takes as `baseURL`). */
  readonly url: string
  /** The received request bodies (valid ones), in order. */
  readonly requests: ReadonlyArray<ChatRequestBody>
  /** The same bodies as the exact text received (UTF-8), for byte-level checks. */
  readonly bodies: ReadonlyArray<string>
  /** The headers of those requests (lower-cased names), in the same order. */
  readonly headers: ReadonlyArray<Readonly<Record<string, string>>>
  /** Call numbers of streams the client abandoned before they were complete (it closed the socket early). */
  readonly aborted: ReadonlyArray<number>
}

const RequestBody = Schema.Struct({
  messages: Schema.Array(Schema.Struct({ role: Schema.String })),
  stream: Schema.optional(Schema.NullOr(Schema.Boolean)),
  stream_options: Schema.optional(
    Schema.NullOr(Schema.Struct({ include_usage: Schema.optional(Schema.NullOr(Schema.Boolean)) }))
  )
})
const decodeBody = Schema.decodeUnknownEither(RequestBody)

const isFailure = (turn: Turn): turn is Failure => typeof turn === "object" && "status" in turn
const isRaw = (turn: Turn): turn is Raw => typeof turn === "object" && "raw" in turn
const isHang = (turn: Turn): turn is Hang => typeof turn === "object" && "hang" in turn

/** An OpenAI-shaped error body. */
export const errorBody = (message: string, type: string, code: string | null = null) => ({
  error: { message, type, param: null, code }
})

const split = (text: string, size: number | undefined, words: boolean): Array<string> => {
  if (text === "") return []
  if (size === undefined && words) return text.match(/\s*\S+\s*|\s+/g) ?? [text]
  const chars = Array.from(text)
  const step = Math.max(1, size ?? 8)
  const out: Array<string> = []
  for (let i = 0; i < chars.length; i += step) out.push(chars.slice(i, i + step).join(""))
  return out
}

const estimate = (text: string): number => Math.ceil(text.length / 4)

interface Planned {
  readonly content: string
  readonly reasoning: string
  readonly calls: ReadonlyArray<{ readonly id: string; readonly name: string; readonly arguments: string }>
  readonly finishReason: string
  readonly usage: unknown
}

const plan = (reply: Reply, body: ChatRequestBody, call: number): Planned => {
  const calls = (reply.toolCalls ?? []).map((c, i) => ({
    id: c.id ?? `call_${call}_${i}`,
    name: c.name,
    arguments: typeof c.arguments === "string" ? c.arguments : JSON.stringify(c.arguments)
  }))
  const content = reply.content ?? ""
  const reasoning = reply.reasoning ?? ""
  const prompt = estimate(JSON.stringify(body.messages))
  let completion = estimate(content) + estimate(reasoning)
  for (const c of calls) completion += estimate(c.name + c.arguments)
  return {
    content,
    reasoning,
    calls,
    finishReason: reply.finishReason ?? (calls.length > 0 ? "tool_calls" : "stop"),
    usage: "usage" in reply
      ? reply.usage
      : { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion }
  }
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

/**
 * Starts a scripted server on 127.0.0.1 (a free port) serving `POST /v1/chat/completions` and
 * `POST /chat/completions`. It is closed, with its open connections, when the scope closes. When the script
 * has no turn for a request, that request gets a 500 saying so.
 */
export const start = (script: Script, options: Options = {}): Effect.Effect<ScriptedChatServer, never, Scope.Scope> =>
  Effect.suspend(() => {
    const requests: Array<ChatRequestBody> = []
    const bodies: Array<string> = []
    const headers: Array<Record<string, string>> = []
    const aborted: Array<number> = []
    let calls = 0
    const model = options.model ?? "scripted"
    const delay = options.delayMs ?? 0
    const created = Math.floor(Date.now() / 1000)

    const sendJson = (res: Http.ServerResponse, status: number, body: unknown, extra: Record<string, string> = {}) => {
      const text = typeof body === "string" ? body : JSON.stringify(body)
      res.writeHead(status, {
        "content-type": typeof body === "string" ? "text/plain" : "application/json",
        "x-scripted-model": "true",
        ...extra
      })
      res.end(text)
    }

    const stream = async (
      res: Http.ServerResponse,
      planned: Planned,
      reply: Reply,
      call: number,
      includeUsage: boolean
    ) => {
      let dropped = false
      res.on("close", () => {
        if (!res.writableFinished && !dropped) aborted.push(call)
      })
      const id = `chatcmpl-scripted-${call}`
      const frame = (choices: ReadonlyArray<unknown>, extra: Record<string, unknown> = {}) => {
        const chunk = { id, object: "chat.completion.chunk", created, model, system_fingerprint: "scripted", choices }
        return `data: ${JSON.stringify({ ...chunk, ...extra })}\n\n`
      }
      const delta = (d: Record<string, unknown>, finish: string | null = null) =>
        frame([{ index: 0, delta: d, logprobs: null, finish_reason: finish }])
      const frames: Array<string> = [delta({ role: "assistant", content: "" })]
      for (const piece of split(planned.reasoning, options.chunkSize, true)) {
        frames.push(delta({ reasoning_content: piece }))
      }
      for (const piece of split(planned.content, options.chunkSize, true)) frames.push(delta({ content: piece }))
      planned.calls.forEach((c, index) => {
        const head = { index, id: c.id, type: "function", function: { name: c.name, arguments: "" } }
        frames.push(delta({ tool_calls: [head] }))
        for (const piece of split(c.arguments, options.chunkSize, false)) {
          frames.push(delta({ tool_calls: [{ index, function: { arguments: piece } }] }))
        }
      })
      res.writeHead(200, {
        "content-type": "text/event-stream",
        "cache-control": "no-cache",
        connection: "keep-alive",
        "x-scripted-model": "true"
      })
      const write = async (text: string) => {
        if (res.destroyed) return false
        res.write(text)
        if (delay > 0) await sleep(delay)
        return !res.destroyed
      }
      for (const f of frames) if (!(await write(f))) return
      if (reply.streamError !== undefined) {
        const e = reply.streamError
        await write(`data: ${JSON.stringify(errorBody(e.message, e.type ?? "server_error", e.code ?? null))}\n\n`)
        res.end()
        return
      }
      if (reply.stall === true) return
      if (reply.disconnect === true) {
        dropped = true
        res.destroy()
        return
      }
      if (!(await write(delta({}, planned.finishReason)))) return
      if (includeUsage && !(await write(frame([], { usage: planned.usage })))) return
      res.end("data: [DONE]\n\n")
    }

    const complete = (res: Http.ServerResponse, planned: Planned, call: number) =>
      sendJson(res, 200, {
        id: `chatcmpl-scripted-${call}`,
        object: "chat.completion",
        created,
        model,
        system_fingerprint: "scripted",
        choices: [{
          index: 0,
          message: {
            role: "assistant",
            content: planned.content === "" && planned.calls.length > 0 ? null : planned.content,
            ...(planned.reasoning !== "" ? { reasoning_content: planned.reasoning } : {}),
            ...(planned.calls.length > 0
              ? {
                tool_calls: planned.calls.map((c) => ({
                  id: c.id,
                  type: "function",
                  function: { name: c.name, arguments: c.arguments }
                }))
              }
              : {})
          },
          logprobs: null,
          finish_reason: planned.finishReason
        }],
        usage: planned.usage
      })

    const handle = (req: Http.IncomingMessage, res: Http.ServerResponse, raw: string) => {
      const path = (req.url ?? "").split("?")[0]
      if (req.method !== "POST" || (path !== "/v1/chat/completions" && path !== "/chat/completions")) {
        const text = `The scripted server has no route ${req.method} ${path}`
        return sendJson(res, 404, errorBody(text, "invalid_request_error", "not_found"))
      }
      let parsed: unknown
      try {
        parsed = JSON.parse(raw)
      } catch (error) {
        const text = `The request body is not valid JSON: ${(error as Error).message}`
        return sendJson(res, 400, errorBody(text, "invalid_request_error", "invalid_json"))
      }
      const checked = decodeBody(parsed)
      if (Either.isLeft(checked)) {
        const issues = ParseResult.TreeFormatter.formatErrorSync(checked.left)
        const text = `The request body is not a chat request: ${issues}`
        return sendJson(res, 400, errorBody(text, "invalid_request_error", "invalid_body"))
      }
      const body = parsed as ChatRequestBody
      const call = calls++
      if (options.remember !== false) {
        requests.push(body)
        bodies.push(raw)
        const seen: Record<string, string> = {}
        for (const [name, value] of Object.entries(req.headers)) {
          seen[name] = Array.isArray(value) ? value.join(", ") : value ?? ""
        }
        headers.push(seen)
      }
      let turn: Turn | undefined
      try {
        turn = typeof script === "function" ? script(body, call) : script[call]
      } catch (error) {
        return sendJson(res, 500, errorBody(`The script failed on call ${call + 1}: ${String(error)}`, "server_error"))
      }
      if (turn === undefined) {
        const size = typeof script === "function" ? "has ended" : `has ${script.length} turns`
        const text = `The scripted server has no turn ${call + 1} (its script ${size})`
        return sendJson(res, 500, errorBody(text, "server_error"))
      }
      if (isFailure(turn)) {
        const failure = turn
        const type = failure.status >= 500 ? "server_error" : "invalid_request_error"
        const payload = failure.body ?? errorBody(`Scripted failure with status ${failure.status}`, type)
        return sendJson(res, failure.status, payload, { ...failure.headers })
      }
      if (isRaw(turn)) {
        res.writeHead(turn.status ?? 200, {
          "content-type": turn.contentType ?? "text/event-stream",
          "x-scripted-model": "true",
          ...turn.headers
        })
        if (turn.cut !== true) return res.end(turn.raw)
        // Let the bytes leave before the socket is torn down.
        return void res.write(turn.raw, () => res.destroy())
      }
      if (isHang(turn)) {
        res.on("close", () => aborted.push(call))
        return
      }
      const reply: Reply = typeof turn === "string" ? { content: turn } : turn
      const planned = plan(reply, body, call)
      if (checked.right.stream !== true) return complete(res, planned, call)
      const includeUsage = checked.right.stream_options?.include_usage === true
      void stream(res, planned, reply, call, includeUsage).catch(() => res.destroy())
    }

    const server = Http.createServer((req, res) => {
      const chunks: Array<Buffer> = []
      req.on("data", (chunk: Buffer) => chunks.push(chunk))
      req.on("end", () => handle(req, res, Buffer.concat(chunks).toString("utf8")))
    })

    return Effect.acquireRelease(
      Effect.async<ScriptedChatServer>((resume) => {
        server.once("error", (error) => resume(Effect.die(error)))
        server.listen(options.port ?? 0, "127.0.0.1", () => {
          const { port } = server.address() as AddressInfo
          resume(Effect.succeed({ url: `http://127.0.0.1:${port}/v1`, requests, bodies, headers, aborted }))
        })
      }),
      () =>
        Effect.async<void>((resume) => {
          server.closeAllConnections()
          server.close(() => resume(Effect.void))
        })
    )
  })
