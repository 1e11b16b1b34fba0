/**
 * A run whose lead dispatches one `task` and answers once it returns, each model call with a usage of its own: the
 * lead's two calls 10 + 5 tokens each, the subagent's 100 + 20. The token-usage tests run it under the settings that
 * change what is counted of it (`token_usage.enabled`, `run_events.track_token_usage`).
 */
import { assert } from "@effect/vitest"
import type { ChatRequestBody, Turn } from "../../../src/layers/ScriptedChatServer.js"
import type { Answer } from "../../support/requests.js"

const task = { name: "task", arguments: { description: "look", prompt: "look", subagent_type: "general-purpose" } }
const lead = { prompt_tokens: 10, completion_tokens: 5 }

/** The scripted model: the subagent looks, the lead dispatches the task and then answers. */
export const script = (body: ChatRequestBody): Turn => {
  if (JSON.stringify(body.messages).includes("general-purpose subagent")) {
    return { content: "looked", usage: { prompt_tokens: 100, completion_tokens: 20 } }
  }
  return body.messages.at(-1)?.role === "tool" ? { content: "done", usage: lead } : { toolCalls: [task], usage: lead }
}

/** Makes thread `threadId`, runs it (subagents on) to its end and answers its stored run, which succeeded. */
export const runTask = async (
  api: (method: string, path: string, body?: unknown) => Promise<Answer>,
  threadId: string
): Promise<any> => {
  assert.strictEqual((await api("POST", "/api/threads", { thread_id: threadId })).status, 200)
  const started = await api("POST", `/api/threads/${threadId}/runs`, {
    input: { messages: [{ type: "human", content: "go" }] },
    context: { subagent_enabled: true }
  })
  assert.strictEqual(started.status, 200, started.text)
  const runId = started.json().run_id
  await api("GET", `/api/threads/${threadId}/runs/${runId}/join`)
  const run = (await api("GET", `/api/threads/${threadId}/runs/${runId}`)).json()
  assert.strictEqual(run.status, "success")
  return run
}
