/**
 * A delegated task in its run's trace. DeerFlow hands its `trace_id` to the subagents a run starts (SPEC §3.3), so
 * a trace backend shows the whole run, its subtasks included, under one trace with the run's session and user
 * (test_tracing_metadata.py). Here: the subagent's model calls are spans of the run's OpenTelemetry trace, under
 * its `antler.run` root, which names the thread (as the user's client knows it, DeerFlow's session), the user
 * and the agent.
 */
import { assert, describe, it } from "@effect/vitest"
import { InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base"
import type { ReadableSpan } from "@opentelemetry/sdk-trace-base"
import type { ChatRequestBody, Turn } from "../../../src/layers/ScriptedChatServer.js"
import * as Requests from "../../support/requests.js"
import * as Support from "./support.js"

const SUBAGENT_ANSWER = "Sub done: three files."

const script = (body: ChatRequestBody): Turn => {
  const text = JSON.stringify(body.messages)
  if (text.includes("general-purpose subagent")) return SUBAGENT_ANSWER
  if (body.messages.at(-1)?.role === "tool") return "All delegated work is done."
  const args = { description: "look around", prompt: "list the workspace", subagent_type: "general-purpose" }
  return { toolCalls: [{ name: "task", arguments: args }] }
}

const parentOf = (span: ReadableSpan) => span.parentSpanContext?.spanId

describe("a run's trace", () => {
  it("holds its subagent's model calls, under the run's root, which names the thread, user and agent", async () => {
    const exporter = new InMemorySpanExporter()
    const gateway = await Support.start({
      script,
      spanProcessor: new SimpleSpanProcessor(exporter),
      config: (url) => ({ ...Support.baseConfig(url), gateway: Support.twoUsers })
    })
    try {
      const alice = Requests.as(() => gateway, Support.ALICE)
      assert.strictEqual((await alice("POST", "/threads", { thread_id: "delegating" })).status, 200)
      const answer = await alice("POST", "/threads/delegating/runs/wait", {
        assistant_id: "lead_agent",
        input: { messages: [{ type: "human", content: "delegate it" }] },
        context: { subagent_enabled: true }
      })
      assert.strictEqual(answer.status, 200, answer.text)
      const spans = exporter.getFinishedSpans()
      const roots = spans.filter((s) => s.name === "antler.run")
      assert.lengthOf(roots, 1)
      const root = roots[0]!
      // the thread as alice's client knows it (DeerFlow's trace session), and as it is stored
      assert.strictEqual(root.attributes["antler.thread_id"], "delegating")
      assert.match(String(root.attributes["antler.stored_thread_id"]), /^delegating\.u[0-9a-f]{12}$/)
      assert.strictEqual(root.attributes["antler.user_id"], "alice")
      assert.strictEqual(root.attributes["antler.agent_name"], "lead_agent")

      const trace = spans.filter((s) => s.spanContext().traceId === root.spanContext().traceId)
      const byId = new Map(trace.map((s) => [s.spanContext().spanId, s]))
      const underRoot = (span: ReadableSpan) => {
        let current: ReadableSpan | undefined = span
        while (current !== undefined && parentOf(current) !== undefined) current = byId.get(parentOf(current)!)
        return current === root
      }
      // every model call of the run, the subagent's among them, is in this trace, under its root
      const models = spans.filter((s) => s.name === "OpenAiModel.generate" && !s.attributes.internal)
      assert.isAtLeast(models.length, 3)
      for (const model of models) {
        assert.strictEqual(model.spanContext().traceId, root.spanContext().traceId, "a model call outside the run")
        assert.isTrue(underRoot(model))
      }
      assert.deepInclude(
        trace.filter((s) => s.name === "Tool.call").map((s) => s.attributes["tool.name"]),
        "task"
      )
    } finally {
      await gateway.stop()
    }
  })
})
