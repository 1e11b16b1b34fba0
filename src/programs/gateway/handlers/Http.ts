/**
 * How the gateway's handlers answer: JSON of an endpoint's declared shape (the value typed by the endpoint's
 * success schema and sent as it is: the schemas hold no transformations, so the value is its own encoding),
 * server-sent events, and the reading of loosely typed query parameters.
 */
import type { Readable } from "node:stream"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Effect from "effect/Effect"
import type * as Schema from "effect/Schema"
import { fail } from "../api/Problem.js"

/** A JSON answer of a declared shape. */
export const json = <A, I>(
  _schema: Schema.Schema<A, I>,
  body: NoInfer<A>,
  status = 200,
  headers: Record<string, string> = {}
) => HttpServerResponse.unsafeJson(body, { status, headers })

/**
 * A JSON list of a declared shape, at most `maxBytes` of it: the leading `items` whose JSON fits (the first always
 * answered, however large), so that a page of items that each hold a thread (its history's states) or a run's input
 * (its runs) is never larger than the gateway may build; the next page starts after the last item answered.
 */
export const jsonPage = <A, I>(
  _schema: Schema.Schema<ReadonlyArray<A>, I>,
  items: NoInfer<ReadonlyArray<A>>,
  maxBytes: number,
  headers: Record<string, string> = {}
) => {
  const parts: Array<string> = []
  let bytes = 2
  for (const item of items) {
    const part = JSON.stringify(item)
    const size = Buffer.byteLength(part) + (parts.length > 0 ? 1 : 0)
    if (parts.length > 0 && bytes + size > maxBytes) break
    parts.push(part)
    bytes += size
  }
  return HttpServerResponse.text(`[${parts.join(",")}]`, { contentType: "application/json", headers })
}

/**
 * Server-sent events, never buffered by a proxy: a stream of them (text, which the server pipes to the socket),
 * or all of them at once.
 */
export const sse = (body: Readable | string, headers: Record<string, string>) =>
  HttpServerResponse.raw(body, {
    contentType: "text/event-stream",
    headers: { "cache-control": "no-cache", "x-accel-buffering": "no", ...headers }
  })

/**
 * Only the fields of `value` that `select` names, as LangGraph's searches answer with `select` (every field when
 * it names none).
 */
export const selectFields = <A extends object>(
  value: A,
  select: ReadonlyArray<string> | null | undefined
): Partial<A> =>
  select == null || select.length === 0
    ? value
    : Object.fromEntries(Object.entries(value).filter(([key]) => select.includes(key))) as Partial<A>

/** A query parameter as sent: once, or repeated. */
export type QueryValue = string | ReadonlyArray<string> | undefined

/** A query parameter's text: the first, when repeated. */
export const queryFirst = (value: QueryValue) => (Array.isArray(value) ? value[0] : value) as string | undefined

/**
 * A query's integer from 1 to `max` (`fallback` when it is not given), else a 422 naming the parameter and what it
 * was (DeerFlow's bounds on its paging and cursors).
 */
export const queryPositive = <F>(name: string, value: QueryValue, fallback: F, max: number) =>
  Effect.gen(function*() {
    const text = queryFirst(value)
    if (text === undefined) return fallback
    const n = Number(text)
    if (!Number.isInteger(n) || n < 1 || n > max) {
      return yield* fail("unprocessable", `${name} must be an integer from 1 to ${max}, got ${JSON.stringify(text)}.`)
    }
    return n
  })

/** A flag of the query: `1` or `true` (the first, when repeated). */
export const queryFlag = (value: QueryValue) => {
  const text = Array.isArray(value) ? value[0] : value
  return text === "1" || text === "true"
}

const TRUE_WORDS: ReadonlySet<string> = new Set(["1", "on", "t", "true", "y", "yes"])
const FALSE_WORDS: ReadonlySet<string> = new Set(["0", "off", "f", "false", "n", "no"])

/**
 * A boolean of the query as DeerFlow's gateway (FastAPI) reads one: `1`, `true`, `yes`, `on`, `t`, `y` or `0`,
 * `false`, `no`, `off`, `f`, `n`, in any case (the first, when repeated); `fallback` when it is not given, undefined
 * when it is no boolean.
 */
export const queryBool = (value: QueryValue, fallback: boolean): boolean | undefined => {
  const text = Array.isArray(value) ? value[0] : value
  if (text === undefined) return fallback
  const word = text.trim().toLowerCase()
  return TRUE_WORDS.has(word) ? true : FALSE_WORDS.has(word) ? false : undefined
}

/** A query parameter's values. */
export const queryList = (value: QueryValue): Array<string> =>
  value === undefined ? [] : typeof value === "string" ? [value] : [...value]

/** The path prefix a request came in under (`""`, `/api`, `/api/langgraph`), for the URLs it is given back. */
export const prefixOf = (url: string) => {
  const at = url.search(/\/(threads|runs)(\/|\?|$)/)
  return at > 0 ? url.slice(0, at) : ""
}
