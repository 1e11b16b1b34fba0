/**
 * `antler serve` killed with SIGKILL in the middle of a run (a real child process, no cleanup), then started again
 * on the same data directory: the run is recorded as `error` (`orphan_recovered`), the steps it completed are
 * in the thread, and the thread takes a new run. The model is a SCRIPTED Chat Completions server in this
 * process; the gateway reaches it with the real `openai` client.
 */
import { afterAll, assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Scope from "effect/Scope"
import * as Exit from "effect/Exit"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as ScriptedChatServer from "../../../src/layers/ScriptedChatServer.js"
import type { ChatRequestBody, Turn } from "../../../src/layers/ScriptedChatServer.js"
import * as Support from "./support.js"
import { serveProcess, writeServeConfig, type ServeProcess as Server } from "../../support/cli.js"
import { until } from "../../support/poll.js"

const lastUser = (body: ChatRequestBody) =>
  JSON.stringify(body.messages.filter((m) => m.role === "user").at(-1)?.content ?? "")

const script = (body: ChatRequestBody): Turn => {
  if (lastUser(body).includes("carry on")) return "Picking up where we left off."
  // step 1 completes (a tool call and its result); the model then never answers step 2
  if (body.messages[body.messages.length - 1]?.role === "tool") return { content: "Still thinking", stall: true }
  return {
    content: "Saving the first part.",
    toolCalls: [{
      name: "write_file",
      arguments: { description: "part one", path: "/mnt/user-data/workspace/part1.md", content: "part one\n" }
    }]
  }
}

const scope = Effect.runSync(Scope.make())
const servers: Array<Server> = []
afterAll(async () => {
  for (const server of servers) server.child.kill("SIGKILL")
  await Effect.runPromise(Scope.close(scope, Exit.void))
})

describe("antler serve killed mid-run", () => {
  it("restarts with the run recorded as error, its completed steps kept, and the thread usable", async () => {
    const scripted = await Effect.runPromise(Scope.extend(ScriptedChatServer.start(script), scope))
    const home = Support.tempDir("antler-restart-")
    const config = writeServeConfig(Path.join(home, "config.yaml"), scripted.url, { sandbox: { allow_host_bash: false } })

    const first = serveProcess(home, config)
    servers.push(first)
    const url = await first.url
    const post = (base: string, path: string, body: unknown) =>
      fetch(`${base}${path}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) })
    const thread = await (await post(url, "/threads", {})).json() as any
    const run = await (await post(url, `/threads/${thread.thread_id}/runs`, {
      assistant_id: "lead_agent",
      input: { messages: [{ type: "human", content: "Write it in two parts" }] }
    })).json() as any
    // step 1 is saved, and the model is being asked for step 2
    await until(async () => {
      const state = await (await fetch(`${url}/threads/${thread.thread_id}/state`)).json() as any
      return state.values.messages.some((m: any) => m.type === "tool") && scripted.requests.length >= 2
    }, "the first step saved")
    const running = await (await fetch(`${url}/threads/${thread.thread_id}/runs/${run.run_id}`)).json() as any
    assert.strictEqual(running.status, "running")

    first.child.kill("SIGKILL")
    await new Promise((resolve) => first.child.once("exit", resolve))

    const second = serveProcess(home, config)
    servers.push(second)
    const again = await second.url
    const record = await (await fetch(`${again}/threads/${thread.thread_id}/runs/${run.run_id}`)).json() as any
    assert.strictEqual(record.status, "error")
    assert.strictEqual(record.error, "Gateway restarted before this run reached a durable final state.")
    assert.strictEqual(record.stop_reason, "orphan_recovered")
    assert.include(second.output(), `recorded as error (orphan_recovered): ${run.run_id}`)
    // the completed step is there: the question, the model's call and the tool's result
    const state = await (await fetch(`${again}/threads/${thread.thread_id}/state`)).json() as any
    assert.deepStrictEqual(Support.visibleTypes(state.values.messages), ["human", "ai", "tool"])
    assert.strictEqual(Support.visible(state.values.messages)[2].content, "OK")
    const part1 = Path.join(home, "users/default/threads", thread.thread_id, "user-data/workspace/part1.md")
    assert.isTrue(Fs.existsSync(part1))
    const info = await (await fetch(`${again}/threads/${thread.thread_id}`)).json() as any
    assert.strictEqual(info.status, "error")
    const failed = await (await post(again, "/threads/search", { status: "error" })).json() as any
    assert.deepStrictEqual(failed.map((t: any) => t.thread_id), [thread.thread_id])
    // and the thread continues
    const next = await post(again, `/threads/${thread.thread_id}/runs/wait`, {
      assistant_id: "lead_agent",
      input: { messages: [{ type: "human", content: "carry on" }] }
    })
    assert.strictEqual(next.status, 200)
    const values = await next.json() as any
    assert.strictEqual(values.messages.at(-1).content, "Picking up where we left off.")
    const runs = await (await fetch(`${again}/threads/${thread.thread_id}/runs`)).json() as any
    assert.deepStrictEqual(runs.map((r: any) => r.status), ["success", "error"])
    const idle = await (await post(again, "/threads/search", { status: "idle" })).json() as any
    assert.deepStrictEqual(idle.map((t: any) => t.thread_id), [thread.thread_id])
  }, 180_000)
})
