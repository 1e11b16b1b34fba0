/**
 * A stateless run (`POST /runs/wait`, `/runs`, `/runs/stream`) leaves no thread behind. Its thread was deleted
 * when the run ended, and the memory update made after the run (debounced, or when the gateway stops) recorded
 * its token usage on that thread id, which re-created it as an empty "Untitled" thread: such ghosts filled the
 * thread lists of both web apps. Now the memory update records usage only on a thread that still exists.
 */
import { afterAll, assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import type { ChatRequestBody } from "../../../src/layers/ScriptedChatServer.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const MEMORY_PROMPT = "You maintain the long-term memory"

const text = (content: unknown) => (typeof content === "string" ? content : JSON.stringify(content ?? ""))

const script = (body: ChatRequestBody) => {
  if (text(body.messages[0]?.content).startsWith(MEMORY_PROMPT)) {
    return JSON.stringify({
      user: {},
      history: {},
      newFacts: [{
        content: "Likes short answers",
        category: "preference",
        confidence: 0.95,
        scope: "user", durability: "durable", authority: "descriptive"
      }]
    })
  }
  return "Short answer."
}

const gateways: Array<TestGateway> = []
afterAll(async () => {
  for (const gateway of gateways) await gateway.stop().catch(() => {})
})

const call = (gateway: TestGateway) => async (method: string, path: string, body?: unknown) => {
  const response = await fetch(`${gateway.url}${path}`, {
    method,
    headers: { "content-type": "application/json" },
    ...(body === undefined ? {} : { body: JSON.stringify(body) })
  })
  const raw = await response.text()
  return { status: response.status, json: () => JSON.parse(raw), raw }
}

describe("stateless runs", () => {
  for (const path of ["/runs/wait", "/runs/stream", "/runs"]) {
    it(`${path} leaves no thread behind, its memory update included`, async () => {
      const home = Support.tempDir("antler-gw-stateless-")
      // as DeerFlow's app uses it: no tokens (every request is the default user's)
      const config = { gateway: { heartbeat_seconds: 1 }, memory: { enabled: true } }
      const first = await Support.start({ script, config, home })
      gateways.push(first)
      const api = call(first)
      const answer = await api("POST", path, {
        assistant_id: "lead_agent",
        input: { messages: [{ type: "human", content: "Keep it short, please." }] }
      })
      assert.strictEqual(answer.status, 200, answer.raw)
      if (path === "/runs") {
        const run = answer.json()
        // the background run's end: its thread is gone once it ended
        for (;;) {
          const listed = (await api("POST", "/threads/search", {})).json() as Array<unknown>
          if (listed.length === 0 && first.runs.get(run.run_id)?.finished() === true) break
          await new Promise((resolve) => setTimeout(resolve, 20))
        }
      }
      // stopping the gateway makes the pending memory update
      await first.stop()
      assert.isTrue(first.scripted.requests.some((r) => text(r.messages[0]?.content).startsWith(MEMORY_PROMPT)))
      const again = await Support.start({ script, config, home })
      gateways.push(again)
      const threads = (await call(again)("POST", "/threads/search", {})).json()
      assert.deepStrictEqual(threads, [])
      assert.deepStrictEqual(await Effect.runPromise(again.store.list), [])
    })
  }
})
