/**
 * DeerFlow's test_replay_golden, `test_replay_write_read_file_ultra_matches_golden`: its recorded scenario (the model
 * writes /mnt/user-data/outputs/note.txt, the thread is titled, the model reads the file back and answers with its
 * contents) streamed with `stream_mode: ["values"]` in ultra mode, read as (event name, top-level keys). DeerFlow
 * pins the exact sequence LangGraph's node steps make; Antler's steps are its own (one `values` a step, every state
 * key present, host paths never sent), so what is pinned here is what a client reads of it: `metadata` first (with
 * `run_id` and `thread_id`), then `values` only, `end` last; every `values` holds the messages, and the last one the
 * title and the answer (no artifact: the file was never presented). Since the recorded model never presents the
 * file it wrote, DeerFlow's worker records the run as failed (artifact delivery incomplete) while its stream says
 * nothing of it; Antler's stream says so with an `error` event before `end`, as any failed run's does (deliberate,
 * docs/deerflow.md: "a failed delivery streams its error").
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import type { ChatRequestBody, Turn } from "../../../src/layers/ScriptedChatServer.js"
import * as Requests from "../../support/requests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const TOKEN = "ada-token-replay-golden-0000"
const PROMPT = "Using your own file tools directly, create the file /mnt/user-data/outputs/note.txt with exactly this " +
  "content: hi from replay. Then read that same file back and reply with its exact contents. Do NOT delegate to a " +
  "subagent and do NOT use the task tool — do it yourself. Do not ask any clarifying questions."
const PATH = "/mnt/user-data/outputs/note.txt"

let gateway: TestGateway
const ada = Requests.as(() => gateway, TOKEN)

const tools = (body: ChatRequestBody) => body.messages.filter((m: any) => m.role === "tool").length

beforeAll(async () => {
  gateway = await Support.start({
    script: (body: ChatRequestBody): Turn => {
      const done = tools(body)
      if (done === 0) {
        return {
          toolCalls: [{
            name: "write_file",
            arguments: { description: "Create the requested output file", path: PATH, content: "hi from replay." }
          }]
        }
      }
      if (done === 1) return { toolCalls: [{ name: "read_file", arguments: { description: "Read it back", path: PATH } }] }
      return "hi from replay."
    },
    config: { gateway: { auth: { tokens: [{ token: TOKEN, user: "ada" }] } } }
  })
})
afterAll(() => gateway?.stop())

/** An SSE answer as (event, data) pairs. */
const events = (text: string) =>
  text.split("\n\n").filter((chunk) => chunk.includes("event: ")).map((chunk) => {
    const event = chunk.match(/^event: (.*)$/m)![1]!
    const data = chunk.split("\n").filter((l) => l.startsWith("data: ")).map((l) => l.slice(6)).join("\n")
    return { event, data: data === "" ? undefined : JSON.parse(data) }
  })

describe("test_replay_golden", () => {
  it("test_replay_write_read_file_ultra_matches_golden", async () => {
    const streamed = await ada("POST", "/api/threads/replay/runs/stream", {
      input: { messages: [{ type: "human", content: [{ type: "text", text: PROMPT }] }] },
      context: { is_bootstrap: false, mode: "ultra", thinking_enabled: true, is_plan_mode: true, subagent_enabled: true },
      stream_mode: ["values"],
      if_not_exists: "create"
    })
    assert.strictEqual(streamed.status, 200, streamed.text)
    const got = events(streamed.text).filter((e) => e.event !== "heartbeat")
    assert.strictEqual(got[0]?.event, "metadata")
    assert.includeMembers(Object.keys(got[0]!.data), ["run_id", "thread_id"])
    assert.strictEqual(got.at(-1)?.event, "end")
    assert.deepStrictEqual(got.at(-2), {
      event: "error",
      data: {
        message: "Artifact delivery incomplete: no produced output artifact was presented",
        name: "ArtifactDeliveryIncomplete",
        error: "ArtifactDeliveryIncomplete"
      }
    })
    const values = got.slice(1, -2)
    assert.isAtLeast(values.length, 3)
    for (const e of values) {
      assert.strictEqual(e.event, "values")
      assert.includeMembers(Object.keys(e.data), ["messages", "artifacts", "viewed_images"])
      assert.notProperty(e.data, "thread_data")
    }
    const last = values.at(-1)!.data
    // (the test gateway has no title model: the thread is titled from the question's first words)
    assert.match(last.title, /^Using your own file tools/)
    // written, never presented: no artifact (the reason the delivery check fails it)
    assert.deepStrictEqual(last.artifacts, [])
    const answer = last.messages.findLast((m: any) => m.type === "ai")
    assert.strictEqual(answer.content, "hi from replay.")
    const read = last.messages.findLast((m: any) => m.type === "tool")
    assert.include(JSON.stringify(read.content), "hi from replay.")
  })
})
