/**
 * OpenTelemetry traces of the gateway's runs, exported to an in-memory exporter: one trace per run, rooted at
 * `antler.run` (thread, run, agent, model), with the model calls (tokens; the internal title call among them) and the
 * tool calls as its descendants.
 */
import { assert, describe, it } from "@effect/vitest"
import { InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base"
import type { ReadableSpan } from "@opentelemetry/sdk-trace-base"
import * as Fs from "node:fs"
import * as Path from "node:path"
import type { ChatRequestBody, Turn } from "../../../src/layers/ScriptedChatServer.js"
import * as Support from "./support.js"

const script = (body: ChatRequestBody): Turn => {
  const last = body.messages[body.messages.length - 1]
  if (!body.tools || body.tools.length === 0) return "Traced thread"
  if (last?.role === "tool") return "All done."
  return {
    toolCalls: [{ name: "write_file", arguments: { description: "d", path: "/mnt/user-data/workspace/a.md", content: "a" } }]
  }
}

const parentOf = (span: ReadableSpan) => span.parentSpanContext?.spanId

describe("traces", () => {
  it("one trace per run: the run's root span with model and tool calls under it", async () => {
    const exporter = new InMemorySpanExporter()
    const gateway = await Support.start({
      script,
      spanProcessor: new SimpleSpanProcessor(exporter),
      config: { title: { model_name: "scripted" } }
    })
    try {
      const post = (path: string, body: unknown) =>
        fetch(`${gateway.url}${path}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) })
      const thread = await (await post("/threads", {})).json() as any
      const runIds: Array<string> = []
      // the first run streamed: the title comes from an internal model call, whose tokens are never streamed
      const streamed = await post(`/threads/${thread.thread_id}/runs/stream`, {
        assistant_id: "lead_agent",
        input: { messages: [{ type: "human", content: "first" }] },
        stream_mode: ["messages-tuple", "values"]
      })
      runIds.push(streamed.headers.get("content-location")!.split("/").pop()!)
      const { events } = await Support.readSse(streamed)
      const texts = new Map<string, string>()
      for (const event of events.filter((e) => e.event === "messages")) {
        const [message] = event.data as [{ id: string; content: unknown }]
        if (typeof message.content === "string") texts.set(message.id, (texts.get(message.id) ?? "") + message.content)
      }
      assert.include([...texts.values()], "All done.")
      assert.isFalse([...texts.values()].some((text) => text.includes("Traced")), JSON.stringify([...texts.values()]))
      assert.strictEqual((events.filter((e) => e.event === "values").at(-1)!.data as any).title, "Traced thread")
      // the second run as the app runs a custom agent: the agent named in its context (its root names it)
      const agentDir = Path.join(gateway.home, "users", "default", "agents", "scout")
      Fs.mkdirSync(agentDir, { recursive: true })
      Fs.writeFileSync(Path.join(agentDir, "config.yaml"), "name: scout\n")
      for (const text of ["second"]) {
        const response = await post(`/threads/${thread.thread_id}/runs/wait`, {
          assistant_id: "lead_agent",
          context: { agent_name: "scout" },
          input: { messages: [{ type: "human", content: text }] }
        })
        assert.strictEqual(response.status, 200)
        runIds.push(response.headers.get("content-location")!.split("/").pop()!)
      }
      // read while the exporter is alive (it drops its spans at shutdown)
      const spans = exporter.getFinishedSpans()
      const roots = spans.filter((s) => s.name === "antler.run")
      assert.strictEqual(roots.length, 2)
      assert.deepStrictEqual(roots.map((r) => r.attributes["antler.run_id"]).sort(), [...runIds].sort())
      for (const root of roots) {
        assert.isUndefined(parentOf(root))
        assert.strictEqual(root.attributes["antler.thread_id"], thread.thread_id)
        const trace = spans.filter((s) => s.spanContext().traceId === root.spanContext().traceId)
        const byId = new Map(trace.map((s) => [s.spanContext().spanId, s]))
        // every span of the trace hangs under the root
        for (const span of trace) {
          let current: ReadableSpan | undefined = span
          while (current !== undefined && parentOf(current) !== undefined) current = byId.get(parentOf(current)!)
          assert.strictEqual(current, root, `${span.name} is not under the run`)
        }
        const models = trace.filter((s) => s.name === "OpenAiModel.generate")
        const tools = trace.filter((s) => s.name === "Tool.call")
        assert.isAtLeast(models.length, 2)
        assert.isTrue(models.every((m) => typeof m.attributes["gen_ai.usage.input_tokens"] === "number"))
        assert.isTrue(models.every((m) => m.attributes["gen_ai.request.model"] === "scripted"))
        assert.deepStrictEqual(tools.map((t) => t.attributes["tool.name"]), ["write_file"])
        // (made only when the app traces: Effect's own tracer would drop them)
        assert.strictEqual(trace.filter((s) => s.name === "DynamicContext.inject").length, 1)
      }
      // the title is an internal call, in the first run's trace only
      const internal = spans.filter((s) => s.name === "OpenAiModel.generate" && s.attributes.internal === "title")
      assert.strictEqual(internal.length, 1)
      const first = roots.find((r) => r.attributes["antler.run_id"] === runIds[0])!
      assert.strictEqual(internal[0]!.spanContext().traceId, first.spanContext().traceId)
      const second = roots.find((r) => r.attributes["antler.run_id"] === runIds[1])!
      assert.strictEqual(first.attributes["antler.agent_name"], "lead_agent")
      assert.strictEqual(second.attributes["antler.agent_name"], "scout")
    } finally {
      await gateway.stop()
    }
  })
})
