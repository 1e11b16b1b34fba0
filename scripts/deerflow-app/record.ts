/**
 * Turns the exchanges of one flow into its recording: each request with its path's ids replaced by placeholders
 * (`{thread_id}`, `{thread_id_2}`, `{run_id}`, ... in the order they first appear; any other UUID `{id_N}`), the
 * shape and a trimmed example of its body, the response's status, headers, shape (or, for a stream, its events),
 * and, from the catalog, where the app makes the call and which response fields it reads. The calls the flow would
 * make once the calls that fail today succeed (read in the app's source) are listed after them.
 */
import * as Catalog from "./catalog.js"
import * as Contract from "./contract.js"
import type { Exchange } from "./recorder.js"

/** A UUID, or 32 hex digits standing alone (a scheduled task's `task-<hex>`, a memory fact's id). */
const UUID = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|(?<![0-9a-f])[0-9a-f]{32}(?![0-9a-f])/gi
const ONE_UUID = new RegExp(UUID.source, "i")
const WHOLE_UUID = new RegExp(`^${UUID.source}$`, "i")
const DATETIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:?\d{2})?$/

/** A call the app makes in a flow once the earlier ones succeed, read in its source. */
export interface Expected {
  readonly method: string
  readonly path: string
  readonly when: string
  /** The body the app sends in this flow, when not the contract's (scripts/deerflow-app/contract.ts). */
  readonly body?: unknown
}

/**
 * What the app reads of a call once another was made in the flow, beyond the endpoint's contract (after the stop
 * button, the page of messages holds the start of the stopped answer): `after` and `call` are `METHOD endpoint`.
 */
export interface ReadAfter {
  readonly after: string
  readonly call: string
  readonly fields: ReadonlyArray<string>
  readonly why: string
}

/** The recorded requests with the fields of `reads` added to the calls they name after their `after` call. */
export const withReadsAfter = <
  R extends {
    readonly method: string
    readonly endpoint: string | null
    readonly app_reads: ReadonlyArray<string>
    readonly expect: { readonly status: ReadonlyArray<number>; readonly fields: ReadonlyArray<string> }
  }
>(requests: ReadonlyArray<R>, reads: ReadonlyArray<ReadAfter>): Array<R> => {
  const made = new Set<string>()
  return requests.map((r) => {
    const key = `${r.method} ${r.endpoint}`
    const more = reads.filter((read) => read.call === key && made.has(read.after))
    made.add(key)
    if (more.length === 0) return r
    const fields = more.flatMap((read) => read.fields).filter((f) => !r.expect.fields.includes(f))
    return {
      ...r,
      app_reads: [...r.app_reads, ...more.map((read) => read.why).filter((why) => !r.app_reads.includes(why))],
      expect: { ...r.expect, fields: [...r.expect.fields, ...fields] }
    }
  })
}

/** Names ids in the order they appear: by the path parameter or JSON key that holds them, else `id`. */
export class Ids {
  private readonly names = new Map<string, string>()
  private readonly counts = new Map<string, number>()

  name(value: string, kind: string): string {
    const known = this.names.get(value)
    if (known !== undefined) return known
    const count = (this.counts.get(kind) ?? 0) + 1
    this.counts.set(kind, count)
    const name = `{${kind}${count === 1 ? "" : `_${count}`}}`
    this.names.set(value, name)
    return name
  }

  /** Learns the ids of a JSON value (by their keys), then of any UUID left. */
  learn(value: unknown, key = "id"): void {
    if (typeof value === "string" && /checkpoint_id$/.test(key)) {
      this.name(value, "checkpoint_id")
      return
    }
    if (typeof value === "string") {
      const found = ONE_UUID.exec(value)
      if (/^(.+_)?id$/.test(key) && found !== null) this.name(found[0].toLowerCase(), key)
      return
    }
    if (Array.isArray(value)) for (const item of value) this.learn(item, key)
    else if (value !== null && typeof value === "object") {
      for (const [k, v] of Object.entries(value)) this.learn(v, k)
    }
  }

  /** A string with every id replaced by its name (an id not seen yet is named `id`). */
  replace(text: string): string {
    return text.replace(UUID, (found) => this.name(found.toLowerCase(), "id"))
  }
}

/** The shape of a JSON value: types in place of values, arrays by their first elements. */
export const shape = (value: unknown, depth = 0): unknown => {
  if (value === null) return "null"
  if (Array.isArray(value)) {
    if (value.length === 0) return []
    if (depth > 6) return ["..."]
    const first = shape(value[0], depth + 1)
    const other = value.slice(1, 4).map((v) => shape(v, depth + 1)).find((s) => JSON.stringify(s) !== JSON.stringify(first))
    return other === undefined ? [first] : [first, other]
  }
  if (typeof value === "object") {
    if (depth > 6) return "object"
    const out: Record<string, unknown> = {}
    for (const [k, v] of Object.entries(value as Record<string, unknown>)) out[k] = shape(v, depth + 1)
    return out
  }
  return typeof value
}

/** A trimmed copy of a JSON value for the recording: ids named, dates as `{datetime}`, long strings cut. */
const example = (value: unknown, ids: Ids, depth = 0, key = ""): unknown => {
  if (/password/i.test(key)) return "{password}"
  if (typeof value === "string" && /checkpoint_id$/.test(key)) return ids.name(value, "checkpoint_id")
  if (typeof value === "string") {
    if (DATETIME.test(value)) return "{datetime}"
    const named = ids.replace(value)
    return named.length > 240 ? `${named.slice(0, 200)}... (${named.length} characters)` : named
  }
  if (Array.isArray(value)) {
    if (depth > 8) return ["..."]
    const head = value.slice(0, 6).map((v) => example(v, ids, depth + 1))
    return value.length > 6 ? [...head, `... ${value.length - 6} more`] : head
  }
  if (value !== null && typeof value === "object") {
    if (depth > 8) return "{...}"
    const out: Record<string, unknown> = {}
    for (const [k, v] of Object.entries(value as Record<string, unknown>)) out[k] = example(v, ids, depth + 1, k)
    return out
  }
  return value
}

const parseJson = (text: string): { ok: true; value: unknown } | { ok: false } => {
  try {
    return { ok: true, value: JSON.parse(text) }
  } catch {
    return { ok: false }
  }
}

/** The events of a server-sent event stream (name and parsed data). */
export const parseSse = (text: string): Array<{ event: string; data: unknown }> => {
  const events: Array<{ event: string; data: unknown }> = []
  for (const block of text.split(/\n\n/)) {
    if (block.trim() === "" || block.startsWith(":")) continue
    let event = "message"
    const data: Array<string> = []
    for (const line of block.split("\n")) {
      if (line.startsWith("event:")) event = line.slice(6).trim()
      else if (line.startsWith("data:")) data.push(line.slice(5).trimStart())
    }
    const parsed = parseJson(data.join("\n"))
    events.push({ event, data: parsed.ok ? parsed.value : data.join("\n") })
  }
  return events
}

/** Event names in order, runs of one name counted (`messages ×12`). */
const eventRuns = (events: ReadonlyArray<{ event: string }>): Array<string> => {
  const out: Array<string> = []
  let last = ""
  let count = 0
  const flush = () => {
    if (count > 0) out.push(count === 1 ? last : `${last} ×${count}`)
  }
  for (const { event } of events) {
    if (event === last) count++
    else {
      flush()
      last = event
      count = 1
    }
  }
  flush()
  return out
}

const body = (raw: Buffer, contentType: string | undefined, ids: Ids) => {
  if (raw.length === 0) return undefined
  const type = contentType ?? ""
  if (type.includes("json") || type === "") {
    const parsed = parseJson(raw.toString("utf8"))
    if (parsed.ok) return { shape: shape(parsed.value), example: example(parsed.value, ids) }
  }
  if (type.includes("x-www-form-urlencoded")) {
    const fields = Object.fromEntries(
      [...new URLSearchParams(raw.toString("utf8"))].map(([k, v]) => [k, /password/i.test(k) ? "{password}" : ids.replace(v)])
    )
    return { form: fields }
  }
  if (type.includes("multipart/form-data")) {
    const text = raw.toString("latin1")
    const parts = [
      ...text.matchAll(/Content-Disposition: form-data; name="([^"]+)"(?:; filename="([^"]*)")?[^\r\n]*\r\n(?:[^\r\n]+\r\n)*\r\n/gi)
    ].map((m) => {
      if (m[2] !== undefined) return { name: m[1], filename: m[2] }
      const start = m.index + m[0].length
      const value = text.slice(start, text.indexOf("\r\n--", start))
      return { name: m[1], value: ids.replace(value.slice(0, 200)) }
    })
    return { multipart: parts, bytes: raw.length }
  }
  return { bytes: raw.length, text: ids.replace(raw.toString("utf8").slice(0, 200)) }
}

/** The headers of a recording: ids named, cookies and tokens reduced to their names. */
const headers = (all: Readonly<Record<string, string>>, ids: Ids): Record<string, string> => {
  const out: Record<string, string> = {}
  for (const [name, value] of Object.entries(all)) {
    if (name === "user-agent") continue
    if (name === "cookie") out[name] = value.split(/;\s*/).map((c) => `${c.split("=")[0]}=...`).join("; ")
    else if (name === "set-cookie") {
      out[name] = value.split("\n").map((c) => `${c.split("=")[0]}=...; ${c.split(";").slice(1).join(";").trim()}`)
        .join("\n")
    } else if (name === "x-csrf-token" || name === "authorization" || name === "x-api-key") out[name] = "{secret}"
    else if (name === "host") out[name] = "{gateway}"
    else if (name === "origin" || name === "referer") out[name] = ids.replace(value.replace(/^https?:\/\/[^/]+/, "{app}"))
    else out[name] = ids.replace(value)
  }
  return out
}

/** Who made a request: the browser (through Next's rewrite proxy) or Next's own server. */
const from = (exchange: Exchange) =>
  /Chrome|Mozilla/.test(exchange.requestHeaders["user-agent"] ?? "") ? "browser" : "next-server"

/** The recording of one request. */
const request = (exchange: Exchange, ids: Ids) => {
  const url = new URL(exchange.url, "http://gateway")
  const matched = Catalog.match(exchange.method, url.pathname)
  const path = matched === undefined
    ? ids.replace(url.pathname)
    : Object.entries(matched.params).reduce(
      (p, [name, value]) =>
        p.replace(`{${name}*}`, ids.replace(value)).replace(
          `{${name}}`,
          WHOLE_UUID.test(value) ? ids.name(value.toLowerCase(), name) : ids.replace(encodeURIComponent(value))
        ),
      matched.endpoint.path
    )
  const query: Record<string, string> = {}
  for (const [k, v] of url.searchParams) query[k] = ids.replace(v)
  const responseType = exchange.responseHeaders["content-type"]
  const stream = (responseType ?? "").includes("text/event-stream")
  const events = stream ? parseSse(exchange.responseBody.toString("utf8")) : []
  const firstOf = new Map<string, unknown>()
  for (const e of events) if (!firstOf.has(e.event)) firstOf.set(e.event, e.data)
  const lastValues = [...events].reverse().find((e) => e.event === "values")
  return {
    from: from(exchange),
    method: exchange.method,
    path,
    ...(Object.keys(query).length > 0 ? { query } : {}),
    ...(matched !== undefined ? { endpoint: matched.endpoint.path } : { endpoint: null }),
    request: {
      headers: headers(exchange.requestHeaders, ids),
      ...(exchange.requestBody.length > 0 ? { body: body(exchange.requestBody, exchange.requestHeaders["content-type"], ids) } : {})
    },
    response: {
      status: exchange.error !== undefined ? `unreachable: ${exchange.error}` : exchange.status,
      headers: headers(exchange.responseHeaders, ids),
      ...(exchange.aborted
        ? { cut: "the client or the proxy closed the response before its end" }
        : !exchange.done
        ? { cut: "the response had not ended when the flow ended" }
        : {}),
      ...(stream
        ? {
          events: eventRuns(events),
          event_shapes: Object.fromEntries([...firstOf].map(([name, data]) => [name, shape(data)])),
          metadata: example(firstOf.get("metadata"), ids),
          ...(lastValues !== undefined ? { last_values: example(lastValues.data, ids) } : {}),
          ...(firstOf.has("error") ? { error: example(firstOf.get("error"), ids) } : {})
        }
        : exchange.responseBody.length > 0
        ? { body: body(exchange.responseBody, responseType, ids) }
        : {})
    },
    app_reads: matched?.endpoint.reads ?? [],
    expect: expectation(exchange.method, matched?.endpoint.path, exchange.error !== undefined ? 0 : exchange.status),
    source: matched?.endpoint.source ?? "not in the catalog (scripts/deerflow-app/catalog.ts)"
  }
}

/** What the contract test checks of a call: the statuses the app takes and the fields it reads. */
const expectation = (method: string, endpoint: string | undefined, recorded: number) => {
  const contract = endpoint === undefined ? undefined : Contract.of(method, endpoint)
  return { status: Contract.expectedStatus(contract, recorded), fields: contract?.fields ?? [] }
}

/** The ids a request or its answer introduces, learnt before it is written (so names follow first use). */
const learn = (exchange: Exchange, ids: Ids) => {
  const url = new URL(exchange.url, "http://gateway")
  const matched = Catalog.match(exchange.method, url.pathname)
  if (matched !== undefined) {
    for (const [name, value] of Object.entries(matched.params)) {
      if (WHOLE_UUID.test(value)) ids.name(value.toLowerCase(), name)
    }
  }
  const request = parseJson(exchange.requestBody.toString("utf8"))
  if (request.ok) ids.learn(request.value)
  const type = exchange.responseHeaders["content-type"] ?? ""
  if (type.includes("text/event-stream")) {
    for (const e of parseSse(exchange.responseBody.toString("utf8"))) if (e.event === "metadata") ids.learn(e.data)
  } else {
    const response = parseJson(exchange.responseBody.toString("utf8"))
    if (response.ok) ids.learn(response.value)
  }
}

/** A flow's verdict: its checks passed with no failed call, passed with failed calls, or a check failed. */
export type Result = { readonly status: "passed" | "degraded" | "failed"; readonly reason: string }

/** The recording of a flow. */
export const recording = (options: {
  readonly flow: string
  readonly description: string
  readonly exchanges: ReadonlyArray<Exchange>
  readonly expected: ReadonlyArray<Expected>
  readonly readsAfter?: ReadonlyArray<ReadAfter> | undefined
  readonly result: Result
  readonly auth: "disabled" | "enabled"
  readonly meta: Record<string, unknown>
}) => {
  const ids = new Ids()
  const requests = withReadsAfter(
    options.exchanges.map((exchange) => {
      learn(exchange, ids)
      return request(exchange, ids)
    }),
    options.readsAfter ?? []
  )
  const seen = new Set(requests.map((r) => `${r.method} ${r.endpoint}`))
  // the calls not reached are about the flow's own thread and run: the last ones its requests named
  const named = (pattern: RegExp) => [...JSON.stringify(requests).matchAll(pattern)].at(-1)?.[0]
  const thread = [...requests].reverse().map((r) => /^\/api\/threads\/(\{thread_id(?:_\d+)?\})/.exec(r.path)?.[1])
    .find((name) => name !== undefined) ?? "{thread_id}"
  const run = named(/\{run_id(?:_\d+)?\}/g) ?? "{run_id}"
  const own = (value: unknown): unknown =>
    value === undefined ? undefined : JSON.parse(
      JSON.stringify(value).replaceAll("{thread_id}", thread).replaceAll("{run_id}", run)
    )
  const fromSource = options.expected
    .filter((e) => !seen.has(`${e.method} ${e.path}`))
    .map((e) => {
      const endpoint = Catalog.find(e.method, e.path)
      const contract = Contract.of(e.method, e.path)
      const body = own(e.body ?? contract?.body)
      return {
        method: e.method,
        path: own(e.path) as string,
        template: e.path,
        when: e.when,
        request: endpoint?.request ?? null,
        ...(contract?.query !== undefined ? { query: contract.query } : {}),
        ...(body !== undefined ? { body } : {}),
        ...(contract?.form !== undefined ? { form: contract.form } : {}),
        app_reads: endpoint?.reads ?? [],
        expect: expectation(e.method, e.path, 0),
        source: endpoint?.source ?? "not in the catalog"
      }
    })
  const summary = new Map<string, number>()
  for (const r of requests) {
    const line = `${r.method} ${r.path} → ${r.response.status}`
    summary.set(line, (summary.get(line) ?? 0) + 1)
  }
  return {
    flow: options.flow,
    description: options.description,
    auth: options.auth,
    recorded: options.meta,
    result: { ...options.result, reason: ids.replace(options.result.reason) },
    summary: [...summary].map(([line, count]) => (count === 1 ? line : `${line} (×${count})`)),
    requests,
    not_reached: fromSource
  }
}
