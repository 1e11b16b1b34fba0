/**
 * W3C Trace Context on the gateway's runs, through a real gateway over HTTP with its spans in an in-memory exporter
 * and the real `openai` client calling a loopback model server: a valid `traceparent` (with its `tracestate`) on
 * the request that starts a run makes the run's span a child of the client's span, in the client's trace, with
 * every span of the run in that trace; the model calls carry the trace onwards (`traceparent` naming the call's
 * span, the client's `tracestate`); DeerFlow's `X-Trace-Id` stays an attribute; a run that waited for a place joins
 * its own request's trace. A `sampled` flag of 0 is followed.
 * An invalid or hostile value is ignored whole (the run a root of its own, nothing of it sent or answered), never
 * an error; a `tracestate` is bounded. Without tracing no trace header is sent to the model.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base"
import type { ReadableSpan } from "@opentelemetry/sdk-trace-base"
import * as FC from "effect/FastCheck"
import type { ChatRequestBody, Turn } from "../../../src/layers/ScriptedChatServer.js"
import * as TraceContext from "../../../src/services/TraceContext.js"
import * as Support from "./support.js"

const TRACE = "0af7651916cd43dd8448eb211c80319c"
const SPAN = "b7ad6b7169203331"

/** One tool call, then an answer: a run of two model calls and a tool call ("stall": no answer at all). */
const script = (body: ChatRequestBody): Turn => {
  if (Support.lastUserText(body).includes("stall")) return { content: "Thinking", stall: true }
  if (body.messages.at(-1)?.role === "tool") return "All done."
  return {
    toolCalls: [{
      name: "write_file",
      arguments: { description: "d", path: "/mnt/user-data/workspace/a.md", content: "a" }
    }]
  }
}

const exporter = new InMemorySpanExporter()
let gateway: Support.TestGateway
beforeAll(async () => {
  gateway = await Support.start({
    script,
    spanProcessor: new SimpleSpanProcessor(exporter),
    config: (url) => ({ ...Support.baseConfig(url), logging: { enhance: { enabled: true } } })
  })
})
afterAll(() => gateway.stop())

let asked = 0

/**
 * A run on a new thread, waited for, with `headers` (a `Headers` keeps a header given twice): its answer, its
 * spans (read while the exporter is alive) and the headers of its model requests.
 */
const run = async (headers: Headers | Record<string, string>, path: "wait" | "stream" = "wait") => {
  const question = `question ${++asked}`
  const thread = await (await fetch(`${gateway.url}/threads`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: "{}"
  })).json() as any
  const sent = new Headers(headers)
  sent.set("content-type", "application/json")
  const response = await fetch(`${gateway.url}/threads/${thread.thread_id}/runs/${path}`, {
    method: "POST",
    headers: sent,
    body: JSON.stringify({ assistant_id: "lead_agent", input: Support.userInput(question), stream_mode: ["values"] })
  })
  assert.strictEqual(response.status, 200, await response.clone().text())
  if (path === "stream") assert.strictEqual((await Support.readSse(response)).events.at(-1)?.event, "end")
  else await response.json()
  const spans = exporter.getFinishedSpans()
  const root = spans.find((s) => s.name === "antler.run" && s.attributes["antler.thread_id"] === thread.thread_id)
  const models = gateway.scripted.requests.flatMap((body, i) =>
    JSON.stringify(body.messages).includes(question) ? [gateway.scripted.headers[i]!] : []
  )
  assert.lengthOf(models, 2)
  return { response, root, spans, models }
}

const parentOf = (span: ReadableSpan) => span.parentSpanContext?.spanId

/** The path a run's request was sent to (its answer's run location, less the run). */
const path = (response: Response) => new URL(response.url).pathname

/** The spans of `root`'s trace that hang under it. */
const under = (spans: ReadonlyArray<ReadableSpan>, root: ReadableSpan) => {
  const trace = spans.filter((s) => s.spanContext().traceId === root.spanContext().traceId)
  const byId = new Map(trace.map((s) => [s.spanContext().spanId, s]))
  return trace.filter((span) => {
    let current: ReadableSpan | undefined = span
    while (current !== undefined && current !== root) current = byId.get(parentOf(current) ?? "")
    return current === root
  })
}

describe("a run started with a valid traceparent", () => {
  it("joins the client's trace under its span; its model calls carry the trace on; X-Trace-Id stays", async () => {
    const { models, response, root, spans } = await run({
      traceparent: `00-${TRACE}-${SPAN}-01`,
      tracestate: "congo=t61rcWkgMzE, rojo=00f067aa0ba902b7",
      "x-trace-id": "deerflow-trace-7"
    }, "stream")
    assert.isDefined(root)
    assert.strictEqual(root!.spanContext().traceId, TRACE)
    assert.strictEqual(parentOf(root!), SPAN)
    assert.isTrue(root!.parentSpanContext?.isRemote)
    assert.strictEqual(root!.spanContext().traceState?.serialize(), "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7")
    assert.strictEqual(root!.attributes["antler.trace_id"], "deerflow-trace-7")
    assert.strictEqual(response.headers.get("x-trace-id"), "deerflow-trace-7")
    // every span of the run is in the client's trace, under the run
    const mine = under(spans, root!)
    const calls = mine.filter((s) => s.name === "OpenAiModel.generate")
    assert.lengthOf(calls, 2)
    assert.deepStrictEqual(mine.filter((s) => s.name === "Tool.call").map((s) => s.attributes["tool.name"]), [
      "write_file"
    ])
    // each model request names its own call's span, in the client's trace, with the client's tracestate
    assert.sameMembers(
      models.map((h) => h.traceparent),
      calls.map((call) => `00-${TRACE}-${call.spanContext().spanId}-01`)
    )
    for (const headers of models) assert.strictEqual(headers.tracestate, "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7")
    // the request's own span is the run's sibling under the client's span, with no header recorded
    const request = spans.find((s) => s.name === "http.server POST" && s.attributes["url.path"] === path(response))
    assert.strictEqual(request?.spanContext().traceId, TRACE)
    assert.strictEqual(parentOf(request!), SPAN)
    assert.strictEqual(request!.attributes["http.response.status_code"], 200)
    assert.isFalse(Object.keys(request!.attributes).some((key) => key.includes("header")))
  })

  it("of a later version is read for its first fields and carried on as version 00", async () => {
    const { models, root } = await run({ traceparent: `cc-${TRACE}-${SPAN}-01-what-comes-later` })
    assert.strictEqual(root!.spanContext().traceId, TRACE)
    assert.strictEqual(parentOf(root!), SPAN)
    for (const headers of models) assert.match(headers.traceparent!, new RegExp(`^00-${TRACE}-[0-9a-f]{16}-01$`))
  })

  it("not sampled: the run is not recorded, and its model calls say so", async () => {
    const before = exporter.getFinishedSpans().length
    const { models, root, spans } = await run({ traceparent: `00-${TRACE.replace("0a", "1b")}-${SPAN}-00` })
    assert.isUndefined(root)
    assert.isFalse(spans.slice(before).some((s) => s.spanContext().traceId === TRACE.replace("0a", "1b")))
    for (const headers of models) {
      assert.match(headers.traceparent!, new RegExp(`^00-${TRACE.replace("0a", "1b")}-[0-9a-f]{16}-00$`))
    }
  })

  it("keeps a bounded tracestate: an invalid one dropped whole, a long one cut by whole members", async () => {
    const long = [
      `big=${"b".repeat(200)}`,
      ...Array.from({ length: 20 }, (_, i) => `k${i}=${"v".repeat(28)}`)
    ].join(",")
    const cases: ReadonlyArray<readonly [string, string | undefined]> = [
      ["Upper=1", undefined],
      ["a=1,a=2", undefined],
      ["a=1,b", undefined],
      ["a=caf\u00e9", undefined],
      ["a=x=y", undefined],
      [Array.from({ length: 33 }, (_, i) => `k${i}=v`).join(","), undefined],
      // (spaces and empty members around members are not part of them; a tenant's key is valid)
      [" , a=1 ,, tenant@vendor=x ", "a=1,tenant@vendor=x"],
      // over 512 characters: the member over 128 goes first, then the last ones until it fits
      [long, Array.from({ length: 15 }, (_, i) => `k${i}=${"v".repeat(28)}`).join(",")]
    ]
    for (const [tracestate, kept] of cases) {
      const { models, root } = await run({ traceparent: `00-${TRACE}-${SPAN}-01`, tracestate })
      assert.strictEqual(root!.spanContext().traceId, TRACE, tracestate)
      assert.strictEqual(root!.spanContext().traceState?.serialize(), kept, tracestate)
      for (const headers of models) assert.strictEqual(headers.tracestate, kept, tracestate)
    }
    assert.isAtMost(cases.at(-1)![1]!.length, 512)
  })
})

describe("a run that waited for a place", () => {
  it("joins the trace of the request that started it, not that of the run it followed", async () => {
    const exported = new InMemorySpanExporter()
    const busy = await Support.start({
      script,
      spanProcessor: new SimpleSpanProcessor(exported),
      config: (url) => ({ ...Support.baseConfig(url), gateway: { heartbeat_seconds: 1, max_active_runs: 1 } })
    })
    try {
      const send = (path: string, body: unknown, headers: Record<string, string> = {}) =>
        fetch(`${busy.url}${path}`, {
          method: "POST",
          headers: { "content-type": "application/json", ...headers },
          body: JSON.stringify(body)
        })
      for (const id of ["first", "second"]) assert.strictEqual((await send("/threads", { thread_id: id })).status, 200)
      const first = await (await send("/threads/first/runs", {
        assistant_id: "lead_agent",
        input: Support.userInput("stall here")
      }, { traceparent: `00-${"1".repeat(32)}-${"2".repeat(16)}-01` })).json() as any
      const second = await (await send("/threads/second/runs", {
        assistant_id: "lead_agent",
        input: Support.userInput("then this one")
      }, { traceparent: `00-${TRACE}-${SPAN}-01` })).json() as any
      assert.strictEqual(second.status, "pending")
      assert.strictEqual((await send(`/threads/first/runs/${first.run_id}/cancel?wait=1`, {})).status, 204)
      assert.strictEqual((await fetch(`${busy.url}/threads/second/runs/${second.run_id}/join`)).status, 200)
      const root = exported.getFinishedSpans().find((s) =>
        s.name === "antler.run" && s.attributes["antler.run_id"] === second.run_id
      )
      assert.strictEqual(root?.spanContext().traceId, TRACE)
      assert.strictEqual(parentOf(root!), SPAN)
    } finally {
      await busy.stop()
    }
  })
})

describe("an invalid or hostile traceparent", () => {
  it("is ignored whole: the run is a root of its own, nothing of it is sent on or answered", async () => {
    const hostile = [
      `00-${TRACE.toUpperCase()}-${SPAN}-01`, // uppercase hex
      `00-${"0".repeat(32)}-${SPAN}-01`, // an all-zero trace id
      `00-${TRACE}-${"0".repeat(16)}-01`, // an all-zero span id
      `ff-${TRACE}-${SPAN}-01`, // the version that is never valid
      `00-${TRACE}-${SPAN}-01-more`, // version 00 with more after it
      `01-${TRACE}-${SPAN}-01x`, // a later version without a dash after its fields
      `00-${TRACE.slice(1)}-${SPAN}-01`, // a trace id one short
      `00-${TRACE}-${SPAN}1-01`, // a span id one long
      `00-${TRACE}-${SPAN}-1`, // one digit of flags
      `00-${TRACE.replace("a", "g")}-${SPAN}-01`, // not hexadecimal
      `00_${TRACE}_${SPAN}_01`, // other separators
      `${"00-".repeat(3000)}`, // long
      "" // nothing
    ]
    for (const value of hostile) {
      const { models, response, root, spans } = await run({ traceparent: value, tracestate: "congo=t61rcWkgMzE" })
      assert.isDefined(root, value)
      assert.isUndefined(parentOf(root!), value)
      assert.notStrictEqual(root!.spanContext().traceId, TRACE, value)
      assert.isUndefined(root!.spanContext().traceState, value)
      assert.isAtLeast(under(spans, root!).length, 3, value)
      for (const headers of models) {
        assert.match(headers.traceparent!, new RegExp(`^00-${root!.spanContext().traceId}-[0-9a-f]{16}-01$`), value)
        assert.notProperty(headers, "tracestate", value)
      }
      assert.isNull(response.headers.get("traceparent"))
      assert.isNull(response.headers.get("tracestate"))
      // the request's own span is a root too, and no span holds the value
      const request = spans.find((s) => s.name === "http.server POST" && s.attributes["url.path"] === path(response))
      assert.isDefined(request, value)
      assert.isUndefined(parentOf(request!), value)
      assert.notStrictEqual(request!.spanContext().traceId, TRACE, value)
      assert.isFalse(JSON.stringify(spans.map((s) => s.attributes)).includes("t61rcWkgMzE"), value)
    }
    // two traceparent headers (joined by the HTTP stack): neither is taken
    const twice = new Headers()
    twice.append("traceparent", `00-${TRACE}-${SPAN}-01`)
    twice.append("traceparent", `00-${TRACE}-${SPAN}-01`)
    const { root } = await run(twice)
    assert.isUndefined(parentOf(root!))
    assert.notStrictEqual(root!.spanContext().traceId, TRACE)
  })
})

describe("TraceContext.parseTraceparent", () => {
  const hex = (length: number) =>
    FC.string({ unit: FC.constantFrom(..."0123456789abcdefABCDEF-x"), minLength: length, maxLength: length })
  it.prop("takes exactly W3C's version 00 and later versions' first fields", [
    FC.oneof(
      FC.tuple(FC.constantFrom("00", "01", "ff", "0A", "zz"), hex(32), hex(16), hex(2), FC.constantFrom("", "-x", "x"))
        .map(([v, t, s, f, rest]) => `${v}-${t}-${s}-${f}${rest}`),
      FC.string({ maxLength: 80 })
    )
  ], ([value]) => {
    const parsed = TraceContext.parseTraceparent(value)
    const match = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(.*)$/.exec(value)
    const valid = match !== null && match[1] !== "ff" && !/^0+$/.test(match[2]!) && !/^0+$/.test(match[3]!) &&
      (match[1] === "00" ? match[5] === "" : match[5] === "" || match[5]!.startsWith("-"))
    assert.deepStrictEqual(
      parsed,
      valid ? { traceId: match[2]!, spanId: match[3]!, sampled: (parseInt(match[4]!, 16) & 1) === 1 } : undefined
    )
  })

  it.prop("a tracestate kept is valid and bounded: at most 32 members, 512 characters, no key twice", [
    FC.array(
      FC.tuple(
        FC.string({ unit: FC.constantFrom(..."abz09_-*/@A "), minLength: 0, maxLength: 12 }),
        FC.string({ unit: FC.constantFrom(..."ab =,~ \t"), minLength: 0, maxLength: 150 })
      ).map(([k, v]) => `${k}=${v}`),
      { maxLength: 40 }
    ).map((members) => members.join(","))
  ], ([value]) => {
    const kept = TraceContext.parseTracestate(value)
    if (kept === undefined) return
    assert.isAtMost(kept.length, 512)
    const members = kept.split(",")
    assert.isAtMost(members.length, 32)
    assert.strictEqual(new Set(members.map((m) => m.split("=")[0])).size, members.length)
    for (const member of members) assert.match(member, /^[a-z0-9][a-z0-9_\-*/@]*=[\x20-\x2b\x2d-\x3c\x3e-\x7e]*[^ ]$/)
  })
})

describe("a page of an allowed origin", () => {
  it("may send the trace headers (CORS preflight)", async () => {
    const cors = await Support.start({
      script,
      config: { gateway: { cors: { allow_origins: ["http://ui.example"] } } }
    })
    try {
      const preflight = await fetch(`${cors.url}/threads/t/runs/wait`, {
        method: "OPTIONS",
        headers: {
          origin: "http://ui.example",
          "access-control-request-method": "POST",
          "access-control-request-headers": "content-type, traceparent, tracestate"
        }
      })
      const allowed = (preflight.headers.get("access-control-allow-headers") ?? "").split(/\s*,\s*/)
      assert.includeMembers(allowed, ["traceparent", "tracestate"])
    } finally {
      await cors.stop()
    }
  })
})

describe("without tracing", () => {
  it("sends no trace header to the model, whatever the client sent", async () => {
    const plain = await Support.start({ script })
    try {
      const thread = await (await fetch(`${plain.url}/threads`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: "{}"
      })).json() as any
      const answer = await fetch(`${plain.url}/threads/${thread.thread_id}/runs/wait`, {
        method: "POST",
        headers: { "content-type": "application/json", traceparent: `00-${TRACE}-${SPAN}-01`, tracestate: "a=1" },
        body: JSON.stringify({ assistant_id: "lead_agent", input: Support.userInput("hello") })
      })
      assert.strictEqual(answer.status, 200)
      assert.lengthOf(plain.scripted.headers, 2)
      for (const headers of plain.scripted.headers) {
        assert.notProperty(headers, "traceparent")
        assert.notProperty(headers, "tracestate")
      }
    } finally {
      await plain.stop()
    }
  })
})
