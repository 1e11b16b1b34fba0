/**
 * DeerFlow's request trace ids (`logging.enhance.enabled`; test_trace_middleware.py, test_trace_context.py,
 * test_worker_langfuse_metadata.py) through a real gateway over HTTP: the id a request's `X-Trace-Id` gives is
 * answered in its response's headers (an error's, a refusal's and an event stream's too), one is made when it is
 * absent or unusable (a control character, a byte beyond ASCII, over 512 characters), and the run a request starts
 * carries it: its log lines are annotated with it and its trace's root span holds it, the header winning over the
 * run's `metadata.deerflow_trace_id`, which wins over a made id. Off (the default), no header is read or answered.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base"
import * as FC from "effect/FastCheck"
import * as HashMap from "effect/HashMap"
import * as Logger from "effect/Logger"
import * as Option from "effect/Option"
import * as Net from "node:net"
import type { ChatRequestBody, Turn } from "../../../src/layers/ScriptedChatServer.js"
import * as TraceId from "../../../src/programs/gateway/TraceId.js"
import * as Support from "./support.js"

/** A run whose question says "flaky" gets a 503 first (the retry middleware logs a warning), then its answer. */
const failed = new Set<string>()
const script = (body: ChatRequestBody): Turn => {
  const asked = Support.lastUserText(body)
  if (asked.includes("stall")) return { content: "Thinking", stall: true }
  if (asked.includes("flaky") && !failed.has(asked)) {
    failed.add(asked)
    return { status: 503 }
  }
  return "Done."
}

/** What the gateway logged: each line's text and its trace id annotation. */
const logged: Array<{ readonly text: string; readonly traceId: string | undefined }> = []
const capture = Logger.replace(
  Logger.defaultLogger,
  Logger.make(({ annotations, message }) => {
    const traceId = Option.getOrUndefined(HashMap.get(annotations, "trace_id"))
    logged.push({
      text: (Array.isArray(message) ? message : [message]).join(" "),
      traceId: traceId === undefined ? undefined : String(traceId)
    })
  })
)

/**
 * A GET whose `X-Trace-Id` is the raw bytes given, over a socket (fetch and Node's client refuse what a hostile
 * client may put on the wire): the answer's status and its `X-Trace-Id` headers.
 */
const rawGet = (url: string, path: string, traceId: Buffer) =>
  new Promise<{ readonly status: number; readonly traceIds: ReadonlyArray<string> }>((resolve, reject) => {
    const { hostname, port } = new URL(url)
    const socket = Net.connect(Number(port), hostname)
    const chunks: Array<Buffer> = []
    socket.on("data", (chunk: Buffer) => chunks.push(chunk))
    socket.on("error", reject)
    socket.on("end", () => {
      const head = Buffer.concat(chunks).toString("latin1").split("\r\n\r\n")[0]!.split("\r\n")
      resolve({
        status: Number(head[0]!.split(" ")[1]),
        traceIds: head.slice(1).filter((line) => /^x-trace-id:/i.test(line)).map((line) => line.slice(11).trim())
      })
    })
    socket.write(Buffer.concat([
      Buffer.from(`GET ${path} HTTP/1.1\r\nHost: ${hostname}:${port}\r\nConnection: close\r\nX-Trace-Id: `),
      traceId,
      Buffer.from("\r\n\r\n")
    ]))
  })

const MADE = /^[0-9a-f]{32}$/

const exporter = new InMemorySpanExporter()
let gateway: Support.TestGateway
beforeAll(async () => {
  gateway = await Support.start({
    script,
    logger: capture,
    spanProcessor: new SimpleSpanProcessor(exporter),
    config: (url) => ({ ...Support.baseConfig(url), logging: { enhance: { enabled: true } } })
  })
})
afterAll(() => gateway.stop())

const get = (path: string, headers: Record<string, string> = {}) => fetch(`${gateway.url}${path}`, { headers })
const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
  fetch(`${gateway.url}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify(body)
  })

describe("X-Trace-Id with logging.enhance.enabled", () => {
  it("answers the request's own id, on a success, a 404, a 422, a route that is not there and a refusal", async () => {
    const ok = await post("/threads", {}, { "x-trace-id": "trace-from-upstream" })
    assert.strictEqual(ok.status, 200)
    assert.strictEqual(ok.headers.get("x-trace-id"), "trace-from-upstream")
    const missing = await get("/threads/no-such-thread", { "x-trace-id": "t-404" })
    assert.strictEqual(missing.status, 404)
    assert.strictEqual(missing.headers.get("x-trace-id"), "t-404")
    const invalid = await post("/threads", { thread_id: 42 }, { "x-trace-id": "t-422" })
    assert.strictEqual(invalid.status, 422)
    assert.strictEqual(invalid.headers.get("x-trace-id"), "t-422")
    const nowhere = await get("/no/such/route", { "x-trace-id": "t-nowhere" })
    assert.strictEqual(nowhere.status, 404)
    assert.strictEqual(nowhere.headers.get("x-trace-id"), "t-nowhere")
    // (another site's page changing something: Guard refuses it before any route)
    const crossSite = await post("/threads", {}, { "x-trace-id": "t-guard", origin: "https://evil.example" })
    assert.strictEqual(crossSite.status, 403)
    assert.strictEqual(crossSite.headers.get("x-trace-id"), "t-guard")
    // spaces around it are not part of it; printable ASCII punctuation is
    const spaced = await get("/threads/no-such-thread", { "x-trace-id": "  abc-123_XYZ.foo:bar/baz~  " })
    assert.strictEqual(spaced.headers.get("x-trace-id"), "abc-123_XYZ.foo:bar/baz~")
  })

  it("makes a new id for each request that gives none", async () => {
    const first = (await get("/threads/no-such-thread")).headers.get("x-trace-id")
    const second = (await get("/threads/no-such-thread")).headers.get("x-trace-id")
    assert.match(first ?? "", MADE)
    assert.match(second ?? "", MADE)
    assert.notStrictEqual(first, second)
  })

  it("replaces an unusable id with a made one, never repeating it", async () => {
    const hostile = [
      Buffer.from("caf\xc3\xa9-1", "latin1"), // UTF-8 of "café-1", beyond ASCII
      Buffer.from("trace\x9fid", "latin1"), // a C1 control
      Buffer.from("trace\tid", "latin1"), // a tab inside
      Buffer.from("a".repeat(513), "latin1"), // one over the limit
      Buffer.from("   ", "latin1") // nothing but spaces
    ]
    for (const value of hostile) {
      const answer = await rawGet(gateway.url, "/threads/no-such-thread", value)
      assert.strictEqual(answer.status, 404)
      assert.lengthOf(answer.traceIds, 1)
      assert.match(answer.traceIds[0]!, MADE, JSON.stringify(value.toString("latin1")))
    }
    // (DEL: Node's parser refuses the request itself, before any route, and nothing of it is answered)
    const del = await rawGet(gateway.url, "/threads/no-such-thread", Buffer.from("trace\x7fid", "latin1"))
    assert.strictEqual(del.status, 400)
    assert.deepStrictEqual(del.traceIds, [])
    const longest = "b".repeat(512)
    assert.deepStrictEqual(
      (await rawGet(gateway.url, "/threads/no-such-thread", Buffer.from(longest))).traceIds,
      [longest]
    )
  })

  it("answers it on a run's event stream, and the run's log lines and root span carry it", async () => {
    const thread = await (await post("/threads", {})).json() as any
    const stream = await post(`/threads/${thread.thread_id}/runs/stream`, {
      assistant_id: "lead_agent",
      input: Support.userInput("a flaky question"),
      stream_mode: ["values"]
    }, { "x-trace-id": "run-trace-1" })
    assert.strictEqual(stream.status, 200)
    assert.strictEqual(stream.headers.get("x-trace-id"), "run-trace-1")
    assert.include(stream.headers.get("content-type") ?? "", "text/event-stream")
    const { events } = await Support.readSse(stream)
    assert.strictEqual(events.at(-1)?.event, "end")
    // the retry's warning, logged by the run's fiber, names the request's trace id
    const retry = logged.filter((line) => line.text.includes("model call failed, retrying"))
    assert.lengthOf(retry, 1)
    assert.strictEqual(retry[0]!.traceId, "run-trace-1")
    const root = exporter.getFinishedSpans().filter((s) => s.name === "antler.run" &&
      s.attributes["antler.thread_id"] === thread.thread_id)
    assert.lengthOf(root, 1)
    assert.strictEqual(root[0]!.attributes["antler.trace_id"], "run-trace-1")
  })

  it("gives a run its metadata's deerflow_trace_id without a header, and the header's over it", async () => {
    const runOf = async (threadId: string, headers: Record<string, string>, question: string) => {
      const answer = await post(`/threads/${threadId}/runs/wait`, {
        assistant_id: "lead_agent",
        input: Support.userInput(question),
        metadata: { deerflow_trace_id: "metadata-trace" }
      }, headers)
      assert.strictEqual(answer.status, 200)
      return exporter.getFinishedSpans().find((s) =>
        s.name === "antler.run" && s.attributes["antler.thread_id"] === threadId
      )
    }
    const plain = await (await post("/threads", {})).json() as any
    const fromMetadata = await runOf(plain.thread_id, {}, "first")
    assert.strictEqual(fromMetadata?.attributes["antler.trace_id"], "metadata-trace")
    const headed = await (await post("/threads", {})).json() as any
    const fromHeader = await runOf(headed.thread_id, { "x-trace-id": "header-trace" }, "second")
    assert.strictEqual(fromHeader?.attributes["antler.trace_id"], "header-trace")
    // an unusable metadata value is not taken: the request's made id is
    const bad = await (await post("/threads", {})).json() as any
    const answer = await post(`/threads/${bad.thread_id}/runs/wait`, {
      assistant_id: "lead_agent",
      input: Support.userInput("third"),
      config: { metadata: { deerflow_trace_id: "evil\nline" } }
    })
    const made = answer.headers.get("x-trace-id")
    assert.match(made ?? "", MADE)
    const span = exporter.getFinishedSpans().find((s) =>
      s.name === "antler.run" && s.attributes["antler.thread_id"] === bad.thread_id
    )
    assert.strictEqual(span?.attributes["antler.trace_id"], made)
  })
})

describe("a run that waited for a place", () => {
  it("logs with the trace id of the request that started it, not that of the run it followed", async () => {
    const busy = await Support.start({
      script,
      logger: capture,
      config: (url) => ({
        ...Support.baseConfig(url),
        gateway: { heartbeat_seconds: 1, max_active_runs: 1 },
        logging: { enhance: { enabled: true } }
      })
    })
    try {
      const send = (path: string, body: unknown, traceId: string) =>
        fetch(`${busy.url}${path}`, {
          method: "POST",
          headers: { "content-type": "application/json", "x-trace-id": traceId },
          body: JSON.stringify(body)
        })
      const from = logged.length
      for (const id of ["first", "second"]) {
        assert.strictEqual((await send("/threads", { thread_id: id }, id)).status, 200)
      }
      const first = await (await send("/threads/first/runs", {
        assistant_id: "lead_agent",
        input: Support.userInput("stall here")
      }, "trace-first")).json() as any
      const second = await (await send("/threads/second/runs", {
        assistant_id: "lead_agent",
        input: Support.userInput("a flaky one that waits")
      }, "trace-second")).json() as any
      assert.strictEqual(second.status, "pending")
      const cancelled = await send(`/threads/first/runs/${first.run_id}/cancel?wait=1`, {}, "trace-cancel")
      assert.strictEqual(cancelled.status, 204)
      assert.strictEqual((await fetch(`${busy.url}/threads/second/runs/${second.run_id}/join`)).status, 200)
      const retry = logged.slice(from).filter((line) => line.text.includes("model call failed, retrying"))
      assert.deepStrictEqual(retry.map((line) => line.traceId), ["trace-second"])
    } finally {
      await busy.stop()
    }
  })
})

describe("X-Trace-Id with logging.enhance off (the default)", () => {
  it("is neither answered nor carried into the run", async () => {
    const off = new InMemorySpanExporter()
    const plain = await Support.start({ script, spanProcessor: new SimpleSpanProcessor(off) })
    try {
      const made = await fetch(`${plain.url}/threads`, {
        method: "POST",
        headers: { "content-type": "application/json", "x-trace-id": "ignored" },
        body: JSON.stringify({})
      })
      assert.strictEqual(made.status, 200)
      assert.isNull(made.headers.get("x-trace-id"))
      const thread = await made.json() as any
      const run = await fetch(`${plain.url}/threads/${thread.thread_id}/runs/wait`, {
        method: "POST",
        headers: { "content-type": "application/json", "x-trace-id": "ignored" },
        body: JSON.stringify({ assistant_id: "lead_agent", input: Support.userInput("hello") })
      })
      assert.strictEqual(run.status, 200)
      assert.isNull(run.headers.get("x-trace-id"))
      const root = off.getFinishedSpans().find((s) => s.name === "antler.run")
      assert.isDefined(root)
      assert.notProperty(root!.attributes, "antler.trace_id")
    } finally {
      await plain.stop()
    }
  })
})

describe("TraceId.normalize (test_trace_context.py)", () => {
  it.prop("takes a value whole or not at all: printable ASCII, trimmed, 1 to 512 characters", [
    FC.oneof(
      FC.string({ maxLength: 600 }),
      FC.string({ unit: "binary", maxLength: 40 }),
      // (mostly usable characters, with the edges on either side of the range)
      FC.string({ unit: FC.constantFrom(" ", "\t", "\n", "a", "~", "-", "\x7f", "\x9f", "é"), maxLength: 40 })
    )
  ], ([value]) => {
    const id = TraceId.normalize(value)
    const trimmed = value.trim()
    const usable = trimmed.length >= 1 && trimmed.length <= 512 && /^[\x20-\x7e]+$/.test(trimmed)
    assert.strictEqual(id, usable ? trimmed : undefined)
  })

  it("refuses what is not a string, and made ids are usable", () => {
    for (const value of [undefined, null, 12345, ["a"], { id: "a" }]) assert.isUndefined(TraceId.normalize(value))
    const made = TraceId.generate()
    assert.match(made, MADE)
    assert.strictEqual(TraceId.normalize(made), made)
  })
})
