/**
 * Replays a recording of DeerFlow's web app (test/fixtures/deerflow-app/<flow>.json, made by `npm run
 * deerflow-app -- --record`) against a gateway: each recorded request in order, then the calls the flow did not
 * reach on the branch it was recorded on, with the ids of this gateway in place of the recording's placeholders
 * (`{thread_id}`, `{run_id_2}`, `{checkpoint_id}`...: bound when an answer first names them, or made up when the
 * app made them up), the browser's cookies and CSRF header, and the statuses and fields the app reads checked.
 * It returns one line per call that the app would not take.
 */
import * as Crypto from "node:crypto"
import * as Contract from "../../scripts/deerflow-app/contract.js"

type BodyInit = string | URLSearchParams | FormData

/** A recorded request (scripts/deerflow-app/record.ts). */
interface Recorded {
  readonly method: string
  readonly path: string
  readonly query?: Readonly<Record<string, string>>
  readonly endpoint: string | null
  readonly request: {
    readonly headers: Readonly<Record<string, string>>
    readonly body?: RecordedBody
  }
  readonly response: {
    readonly status: number | string
    readonly cut?: string
    readonly metadata?: unknown
    readonly last_values?: unknown
    readonly events?: ReadonlyArray<string>
    readonly body?: { readonly example?: unknown }
  }
  readonly expect: { readonly status: ReadonlyArray<number>; readonly fields: ReadonlyArray<string> }
}

type RecordedBody =
  | { readonly shape: unknown; readonly example: unknown }
  | { readonly form: Readonly<Record<string, string>> }
  | { readonly multipart: ReadonlyArray<{ readonly name: string; readonly filename?: string; readonly value?: string }> }
  | { readonly bytes: number; readonly text?: string }

/** A call the app makes once the earlier ones succeed, not reached when recorded. */
interface NotReached {
  readonly method: string
  readonly path: string
  readonly query?: Readonly<Record<string, string>>
  readonly body?: unknown
  readonly form?: Readonly<Record<string, string>>
  readonly expect: { readonly status: ReadonlyArray<number>; readonly fields: ReadonlyArray<string> }
}

/** A flow's recording. */
export interface Recording {
  readonly flow: string
  readonly auth: "disabled" | "enabled"
  readonly requests: ReadonlyArray<Recorded>
  readonly not_reached: ReadonlyArray<NotReached>
}

/** The origin the replayed browser requests come from (the gateway's config lets it in). */
export const APP_ORIGIN = "http://localhost:3000"
const PASSWORD = "deer-replay-password-7"
const PLACEHOLDER = /\{([a-z][a-z0-9_]*)\}/g
/** Names that are not ids of the flow's (left as they are when unbound). */
const NOT_IDS = new Set(["gateway", "secret"])
/** Values of names the app takes from what it shows (a file, an agent, a skill), when no answer named them. */
const DEFAULTS: Readonly<Record<string, string>> = {
  agent_name: "deer-guide",
  skill_name: "deep-research",
  filename: "field-notes.txt",
  path: "mnt/user-data/outputs/deer-notes.md",
  email: "replay@example.com",
  password: PASSWORD,
  app: APP_ORIGIN
}
/** Endpoints whose answers list things of earlier flows: no id is learnt from them. */
const LISTS = new Set(["/api/threads/search", "/api/scheduled-tasks", "/api/agents", "/api/models", "/api/skills"])
/** How long a run's stream may take. */
const STREAM_MS = 30_000

/** A replay against one gateway. */
export class Replay {
  private readonly bound = new Map<string, string>()
  private readonly cookies = new Map<string, string>()
  private readonly open: Array<
    { readonly done: Promise<unknown>; readonly abort: AbortController; readonly answering: Promise<void> }
  > = []
  readonly problems: Array<string> = []

  constructor(private readonly gateway: string) {}

  /** Replays a recording; the calls the app would not take, one line each (a repeated one counted). */
  async run(recording: Recording): Promise<ReadonlyArray<string>> {
    for (const recorded of recording.requests) await this.recorded(recorded)
    for (const call of recording.not_reached) await this.notReached(call)
    await this.close()
    const counts = new Map<string, number>()
    for (const line of this.problems) counts.set(line, (counts.get(line) ?? 0) + 1)
    return [...counts].map(([line, count]) => (count > 1 ? `${line} (×${count})` : line))
  }

  private async close() {
    const timeout = new Promise((resolve) => setTimeout(resolve, 5000))
    await Promise.race([Promise.all(this.open.map((o) => o.done)), timeout])
    for (const o of this.open) o.abort.abort()
  }

  private async value(name: string): Promise<string> {
    const known = this.bound.get(name)
    if (known !== undefined) return known
    if (name === "datetime") return new Date().toISOString()
    if (name === "message_id" || name === "human_message_id") {
      const id = await this.lastMessageId(name === "message_id" ? "ai" : "human")
      if (id !== undefined) return id
    }
    if (NOT_IDS.has(name)) return `{${name}}`
    const fallback = DEFAULTS[name.replace(/_\d+$/, "")]
    const made = fallback ?? Crypto.randomUUID()
    this.bound.set(name, made)
    return made
  }

  /** The id of the thread's last message of a type (for a call the recording did not reach). */
  private async lastMessageId(type: string): Promise<string | undefined> {
    const thread = this.bound.get("thread_id")
    if (thread === undefined) return undefined
    const response = await fetch(`${this.gateway}/api/threads/${thread}/state`, { headers: this.headers({}) })
    if (!response.ok) return undefined
    const state = await response.json() as { values?: { messages?: ReadonlyArray<{ type?: string; id?: string }> } }
    return [...state.values?.messages ?? []].reverse().find((m) => m.type === type)?.id
  }

  private async fill(text: string): Promise<string> {
    let out = ""
    let last = 0
    for (const m of text.matchAll(PLACEHOLDER)) {
      out += text.slice(last, m.index) + await this.value(m[1]!)
      last = m.index! + m[0].length
    }
    return out + text.slice(last)
  }

  private async fillJson(value: unknown, key = ""): Promise<unknown> {
    // a one-time task's time was ahead of the recording: ahead of the replay too (an hour), not "now"
    if (key === "run_at" && value === "{datetime}") return new Date(Date.now() + 3_600_000).toISOString()
    if (typeof value === "string") return this.fill(value)
    if (Array.isArray(value)) {
      const items = value.filter((v) => !(typeof v === "string" && /^\.\.\. \d+ more$/.test(v)))
      return Promise.all(items.map((v) => this.fillJson(v)))
    }
    if (value !== null && typeof value === "object") {
      const out: Record<string, unknown> = {}
      for (const [k, v] of Object.entries(value)) out[k] = await this.fillJson(v, k)
      return out
    }
    return value
  }

  /** Binds the placeholders of a recorded answer to what the same place of this answer holds. */
  private learn(recorded: unknown, actual: unknown): void {
    if (typeof recorded === "string") {
      if (typeof actual !== "string") return
      const names = [...recorded.matchAll(PLACEHOLDER)].map((m) => m[1]!)
      if (names.length === 0 || names.every((n) => this.bound.has(n) || n === "datetime")) return
      const pattern = recorded.split(PLACEHOLDER).map((part, i) =>
        i % 2 === 1 ? "(.+?)" : part.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")
      ).join("")
      const found = new RegExp(`^${pattern}$`).exec(actual)
      if (found === null) return
      names.forEach((name, i) => {
        if (!this.bound.has(name) && name !== "datetime" && !NOT_IDS.has(name)) this.bound.set(name, found[i + 1]!)
      })
      return
    }
    if (Array.isArray(recorded)) {
      if (!Array.isArray(actual)) return
      recorded.forEach((r, i) => {
        if (i < actual.length) this.learn(r, actual[i])
      })
      return
    }
    if (recorded !== null && typeof recorded === "object") {
      if (actual === null || typeof actual !== "object") return
      for (const [k, v] of Object.entries(recorded)) {
        if (k in actual) this.learn(v, (actual as Record<string, unknown>)[k])
      }
    }
  }

  private headers(recorded: Readonly<Record<string, string>>): Record<string, string> {
    const out: Record<string, string> = {}
    for (const name of ["content-type", "accept", "range", "last-event-id", "sec-fetch-site", "sec-fetch-mode"]) {
      const value = recorded[name]
      if (value !== undefined && !(name === "content-type" && value.startsWith("multipart/"))) out[name] = value
    }
    if (recorded.origin !== undefined) out.origin = recorded.origin.replace("{app}", APP_ORIGIN)
    if (recorded.referer !== undefined) out.referer = recorded.referer.replace("{app}", APP_ORIGIN)
    if (recorded.cookie !== undefined) {
      const names = recorded.cookie.split(/;\s*/).map((c) => c.split("=")[0]!)
      const sent = names.filter((n) => this.cookies.has(n)).map((n) => `${n}=${this.cookies.get(n)}`)
      if (sent.length > 0) out.cookie = sent.join("; ")
    }
    if (recorded["x-csrf-token"] !== undefined && this.cookies.has("csrf_token")) {
      out["x-csrf-token"] = this.cookies.get("csrf_token")!
    }
    return out
  }

  private keepCookies(response: Response): Array<string> {
    const names: Array<string> = []
    for (const line of response.headers.getSetCookie()) {
      const [pair, ...attributes] = line.split(";")
      const at = pair!.indexOf("=")
      const name = pair!.slice(0, at).trim()
      const value = pair!.slice(at + 1).trim()
      names.push(name)
      const expired = attributes.some((a) => /^\s*max-age=0\s*$/i.test(a)) || value === ""
      if (expired) this.cookies.delete(name)
      else this.cookies.set(name, value)
    }
    return names
  }

  private async body(recorded: RecordedBody | undefined): Promise<BodyInit | undefined> {
    if (recorded === undefined) return undefined
    if ("example" in recorded) return JSON.stringify(await this.fillJson(recorded.example))
    if ("form" in recorded) {
      const form = new URLSearchParams()
      for (const [k, v] of Object.entries(recorded.form)) form.set(k, await this.fill(v))
      return form
    }
    if ("multipart" in recorded) {
      const form = new FormData()
      for (const part of recorded.multipart) {
        if (part.filename !== undefined) {
          form.append(part.name, new Blob([`Replayed upload ${part.filename}\n`], { type: "text/plain" }), part.filename)
        } else form.append(part.name, await this.fill(part.value ?? ""))
      }
      return form
    }
    return recorded.text !== undefined ? this.fill(recorded.text) : undefined
  }

  private async recorded(recorded: Recorded): Promise<void> {
    const path = await this.fill(recorded.path)
    const query = new URLSearchParams()
    for (const [k, v] of Object.entries(recorded.query ?? {})) query.set(k, await this.fill(v))
    const fields = recorded.response.cut !== undefined
      ? recorded.expect.fields.filter((f) => !f.startsWith("event:") || f === "event:metadata")
      : recorded.expect.fields
    const sent = recorded.request.body !== undefined && "example" in recorded.request.body
      ? recorded.request.body.example
      : undefined
    // the stop button is pressed once the answer shows: a cancel waits for the run's stream to stream its start
    if (recorded.method === "POST" && recorded.endpoint === "/api/threads/{thread_id}/runs/{run_id}/cancel") {
      const streaming = this.open.at(-1)
      if (streaming !== undefined) {
        await Promise.race([streaming.answering, new Promise((resolve) => setTimeout(resolve, STREAM_MS / 3))])
      }
    }
    const answer = await this.call({
      label: `${recorded.method} ${recorded.path}`,
      method: recorded.method,
      url: `${path}${query.size > 0 ? `?${query}` : ""}`,
      headers: this.headers(recorded.request.headers),
      body: await this.body(recorded.request.body),
      expect: { status: recorded.expect.status, fields },
      cut: recorded.response.cut !== undefined,
      learnFrom: recorded.endpoint !== null && LISTS.has(recorded.endpoint) ? undefined : recorded.response
    })
    this.created(recorded.method, recorded.endpoint ?? recorded.path, sent, answer)
  }

  /** The ids a thing the app created is named by from now on (in paths whose parameter names them). */
  private created(method: string, endpoint: string, sent: unknown, answer: unknown): void {
    if (method !== "POST" || answer === undefined || answer === null || typeof answer !== "object") return
    const created = answer as Record<string, unknown>
    if (endpoint === "/api/scheduled-tasks" && typeof created.id === "string") this.bound.set("task_id", created.id)
    if (endpoint === "/api/memory/facts" && Array.isArray(created.facts)) {
      const content = (sent as { content?: string } | undefined)?.content
      const fact = (created.facts as ReadonlyArray<{ id?: string; content?: string }>).find((f) => f.content === content)
      if (fact?.id !== undefined) this.bound.set("fact_id", fact.id)
    }
  }

  /**
   * Waits (up to `STREAM_MS`) until the flow's scheduled task has no run in flight: the app's user edits or deletes
   * a task after its triggered run, which DeerFlow refuses meanwhile (409).
   */
  private async taskSettled(): Promise<void> {
    const task = this.bound.get("task_id")
    if (task === undefined) return
    const until = Date.now() + STREAM_MS
    while (Date.now() < until) {
      const response = await fetch(`${this.gateway}/api/scheduled-tasks`, { headers: this.headers({}) })
      const tasks = response.ok ? await response.json() as ReadonlyArray<{ id?: string; status?: string }> : []
      if (tasks.find((t) => t.id === task)?.status !== "running") return
      await new Promise((resolve) => setTimeout(resolve, 200))
    }
  }

  private async notReached(call: NotReached): Promise<void> {
    if (call.path.startsWith("/api/scheduled-tasks/{task_id}") && call.method !== "GET") await this.taskSettled()
    const path = await this.fill(call.path.replace("{path*}", "{path}"))
    const query = new URLSearchParams()
    for (const [k, v] of Object.entries(call.query ?? {})) query.set(k, await this.fill(v))
    const headers: Record<string, string> = { origin: APP_ORIGIN, ...this.headers({ cookie: "access_token=; csrf_token=" }) }
    if (this.cookies.has("csrf_token") && call.method !== "GET") headers["x-csrf-token"] = this.cookies.get("csrf_token")!
    let body: BodyInit | undefined
    if (call.form !== undefined) body = await this.body({ form: call.form })
    else if (call.body !== undefined) {
      body = JSON.stringify(await this.fillJson(call.body))
      headers["content-type"] = "application/json"
    }
    const answer = await this.call({
      label: `${call.method} ${call.path} (not reached when recorded)`,
      method: call.method,
      url: `${path}${query.size > 0 ? `?${query}` : ""}`,
      headers,
      body,
      expect: call.expect,
      cut: false,
      learnFrom: undefined
    })
    this.created(call.method, call.path, call.body, answer)
  }

  private async call(options: {
    readonly label: string
    readonly method: string
    readonly url: string
    readonly headers: Record<string, string>
    readonly body: BodyInit | undefined
    readonly expect: { readonly status: ReadonlyArray<number>; readonly fields: ReadonlyArray<string> }
    readonly cut: boolean
    readonly learnFrom: Recorded["response"] | undefined
  }): Promise<unknown> {
    const abort = new AbortController()
    let response: Response
    try {
      response = await fetch(`${this.gateway}${options.url}`, {
        method: options.method,
        headers: options.headers,
        ...(options.body !== undefined ? { body: options.body } : {}),
        signal: abort.signal,
        redirect: "manual"
      })
    } catch (error) {
      this.problems.push(`${options.label}: no answer (${(error as Error).message})`)
      return undefined
    }
    const cookies = this.keepCookies(response)
    const etag = response.headers.get("etag")
    if (etag !== null) this.bound.set("etag", etag.replace(/^W\//, "").replaceAll("\"", ""))
    const type = response.headers.get("content-type") ?? ""
    const headers = Object.fromEntries(response.headers)
    if (!options.expect.status.includes(response.status)) {
      const text = type.includes("event-stream") ? "" : await response.text().catch(() => "")
      const detail = detailOf(text)
      this.problems.push(
        `${options.label}: ${response.status}${detail !== "" ? ` (${detail})` : ""}, the app needs ${
          options.expect.status.join(" or ")
        }`
      )
      abort.abort()
      return undefined
    }
    if (type.includes("text/event-stream")) {
      const events = readEvents(response, options.cut ? (e) => e.event === "metadata" : () => false)
      const timed = new Promise<never>((_, reject) =>
        setTimeout(() => reject(new Error(`the stream did not end within ${STREAM_MS / 1000} s`)), STREAM_MS)
      )
      let seen: ReadonlyArray<{ event: string; data: unknown }>
      try {
        seen = await Promise.race([events.first, timed])
      } catch (error) {
        this.problems.push(`${options.label}: ${(error as Error).message}`)
        abort.abort()
        return undefined
      }
      if (options.cut) this.open.push({ done: events.rest.catch(() => {}), abort, answering: events.answering })
      const names = seen.map((e) => e.event)
      const lacking = Contract.missing(options.expect.fields, { body: undefined, headers, cookies, events: names })
      if (lacking.length > 0) this.problems.push(`${options.label}: the stream lacks ${lacking.join(", ")}`)
      const error = seen.find((e) => e.event === "error")
      if (error !== undefined && !(options.learnFrom?.events ?? []).includes("error")) {
        this.problems.push(`${options.label}: the stream ended in an error: ${JSON.stringify(error.data).slice(0, 200)}`)
      }
      if (options.learnFrom !== undefined) {
        this.learn(options.learnFrom.metadata, seen.find((e) => e.event === "metadata")?.data)
        this.learn(options.learnFrom.last_values, [...seen].reverse().find((e) => e.event === "values")?.data)
      }
      return undefined
    }
    const text = await response.text()
    let body: unknown = undefined
    if (type.includes("json")) {
      try {
        body = JSON.parse(text)
      } catch {
        this.problems.push(`${options.label}: the body is not JSON`)
      }
    }
    if (response.status < 300) {
      const lacking = Contract.missing(options.expect.fields, { body, headers, cookies, events: [] })
      if (lacking.length > 0) this.problems.push(`${options.label}: the answer lacks ${lacking.join(", ")}`)
      if (options.learnFrom?.body?.example !== undefined) this.learn(options.learnFrom.body.example, body)
    }
    return body
  }
}

const detailOf = (text: string): string => {
  try {
    const body = JSON.parse(text) as { detail?: unknown; title?: unknown }
    const detail = typeof body.detail === "string" ? body.detail : JSON.stringify(body.detail ?? body.title ?? "")
    return detail.length > 160 ? `${detail.slice(0, 157)}...` : detail
  } catch {
    return text.slice(0, 120)
  }
}

/**
 * The events of a stream: until `stop` says so (`first`), all of them when it ends (`rest`), and when it first
 * streams an answer (`answering`).
 */
const readEvents = (response: Response, stop: (event: { event: string; data: unknown }) => boolean) => {
  const events: Array<{ event: string; data: unknown }> = []
  let resolveAnswering: () => void = () => {}
  // the start of an answer: a `messages` event of an AI message (or a chunk of one)
  const answering = new Promise<void>((resolve) => {
    resolveAnswering = resolve
  })
  let resolveFirst: (value: ReadonlyArray<{ event: string; data: unknown }>) => void = () => {}
  const first = new Promise<ReadonlyArray<{ event: string; data: unknown }>>((resolve) => {
    resolveFirst = resolve
  })
  const rest = (async () => {
    const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader()
    let buffer = ""
    for (;;) {
      const { done, value } = await reader.read()
      if (done) break
      buffer += value
      let end: number
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const block = buffer.slice(0, end)
        buffer = buffer.slice(end + 2)
        if (block.startsWith(":") || block.trim() === "") continue
        let event = "message"
        const data: Array<string> = []
        for (const line of block.split("\n")) {
          if (line.startsWith("event:")) event = line.slice(6).trim()
          else if (line.startsWith("data:")) data.push(line.slice(5).trimStart())
        }
        let parsed: unknown = data.join("\n")
        try {
          parsed = JSON.parse(data.join("\n"))
        } catch {
          // not JSON: kept as text
        }
        events.push({ event, data: parsed })
        const message = event === "messages" && Array.isArray(parsed) ? parsed[0] as { type?: unknown } : undefined
        if (message?.type === "AIMessageChunk" || message?.type === "ai") resolveAnswering()
        if (stop(events[events.length - 1]!)) resolveFirst([...events])
      }
    }
    resolveFirst([...events])
    return events
  })()
  rest.catch(() => resolveFirst([...events]))
  return { first, rest, answering }
}
