/**
 * Durable runs in a cluster (issue 30 item 2): two `antler serve` processes (real child processes) are runners of
 * one cluster on one PostgreSQL database. A background run is accepted by one; the process running it (the holder
 * of the thread's lease) is killed with SIGKILL after the run's first step (a tool call and its result) was saved,
 * while the model is being asked for the next. The survivor takes over the thread's shard, finds the run's durable
 * message unanswered and resumes the run under its id from its last checkpoint: it ends `success`, the completed
 * step is there once, the tool ran once. Skipped, saying why, without PostgreSQL.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Fs from "node:fs"
import * as Path from "node:path"
import type { ChatRequestBody, Turn } from "../../../src/layers/ScriptedChatServer.js"
import * as Cluster from "../../support/cluster.js"
import { until } from "../../support/poll.js"
import * as Postgres from "../../support/postgres.js"
import * as Support from "./support.js"

const pg = await Postgres.start()
if ("skip" in pg) console.warn(`[gateway cluster failover] skipped: ${pg.skip}`)

// step 1: a tool call; then the model hangs once (the process running the run is killed meanwhile), and answers
// the run resumed on the survivor
let hung = 0
const script = (body: ChatRequestBody): Turn => {
  const asked = JSON.stringify(body.messages.filter((m) => m.role === "user").at(-1)?.content ?? "")
  if (asked.includes("Run the slow job")) {
    // a tool call that is still running when its process is killed; once answered, the model says so
    if (body.messages.at(-1)?.role === "tool") return "The slow job was interrupted; I will not run it again."
    return {
      toolCalls: [{
        name: "bash",
        arguments: { description: "Run the slow job", command: "echo ran >> /mnt/user-data/workspace/ran.txt; sleep 20" }
      }]
    }
  }
  if (body.messages.at(-1)?.role === "tool") {
    return hung++ === 0 ? { content: "Still thinking", stall: true } : "Both parts written."
  }
  return {
    content: "Saving the first part.",
    toolCalls: [{
      name: "write_file",
      arguments: { description: "part one", path: "/mnt/user-data/workspace/part1.md", content: "part one\n" }
    }]
  }
}

const suite = Cluster.suite(pg)

/** Two runners of one cluster on a fresh database, sharing a data directory. */
const cluster = async (hostBash: boolean) => {
  const dbUrl = await (pg as Postgres.Postgres).createDatabase()
  const scripted = await suite.model(script)
  const home = Support.tempDir("antler-cluster-failover-")
  const start = () =>
    suite.runner({
      dbUrl,
      home,
      modelUrl: scripted.url,
      config: { sandbox: { allow_host_bash: hostBash } },
      cluster: { health_check_seconds: 1 }
    })
  const a = await start()
  const b = await start()
  return { dbUrl, scripted, home, a, b }
}

const post = (base: string, path: string, body: unknown) =>
  fetch(`${base}${path}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) })

const ended = async (url: string, threadId: string, runId: string, output: () => string) => {
  await until(async () => {
    const record = await (await fetch(`${url}/threads/${threadId}/runs/${runId}`)).json() as any
    return record.status !== "running" && record.status !== "pending"
  }, `the run ended on the survivor: ${output()}`)
  return await (await fetch(`${url}/threads/${threadId}/runs/${runId}`)).json() as any
}

describe.skipIf("skip" in pg)("a cluster's runner killed mid-run", () => {
  it("the run resumes on the survivor from its last checkpoint and ends; no step lost or run twice", async () => {
    const { a, b, dbUrl, home, scripted } = await cluster(false)
    const thread = await (await post(a.url, "/threads", {})).json() as any
    const run = await (await post(a.url, `/threads/${thread.thread_id}/runs`, {
      assistant_id: "lead_agent",
      input: { messages: [{ type: "human", content: "Write it in two parts" }] }
    })).json() as any
    // step 1 is saved, and the model is being asked for step 2
    await until(async () => {
      const state = await (await fetch(`${b.url}/threads/${thread.thread_id}/state`)).json() as any
      return state.values.messages.some((m: any) => m.type === "tool") && hung > 0
    }, "the first step saved")

    const { other: survivor, holder: victim } = Cluster.holderOf(dbUrl, thread.thread_id, a, b)
    victim.server.child.kill("SIGKILL")
    await new Promise((resolve) => victim.server.child.once("exit", resolve))
    // a client that followed the run joins its stream again on the survivor at once, from the last event it got,
    // before the survivor has resumed the run
    const rejoined = fetch(`${survivor.url}/threads/${thread.thread_id}/runs/${run.run_id}/stream`, {
      headers: { "last-event-id": "1" }
    }).then(async (response) => ({ status: response.status, text: await response.text() }))

    // the survivor resumes the run and it ends
    const record = await ended(survivor.url, thread.thread_id, run.run_id, survivor.server.output)
    assert.strictEqual(record.status, "success", JSON.stringify(record))
    // the rejoined client followed the resumed run to its end
    const stream = await rejoined
    assert.strictEqual(stream.status, 200, stream.text)
    assert.notInclude(stream.text, "event: gap", stream.text)
    assert.include(stream.text, "Both parts written.", stream.text)
    assert.match(stream.text, /event: end\n/, stream.text)
    const state = await (await fetch(`${survivor.url}/threads/${thread.thread_id}/state`)).json() as any
    const visible = Support.visible(state.values.messages)
    assert.deepStrictEqual(visible.map((m: any) => m.type), ["human", "ai", "tool", "ai"])
    assert.strictEqual(visible[3].content, "Both parts written.")
    // the tool ran once: one result, one write; the model was asked for step 1 once
    assert.strictEqual(visible.filter((m: any) => m.type === "tool").length, 1)
    const part1 = Path.join(home, "users/default/threads", thread.thread_id, "user-data/workspace/part1.md")
    assert.strictEqual(Fs.readFileSync(part1, "utf8"), "part one\n")
    assert.strictEqual(scripted.requests.filter((r) => r.messages.at(-1)?.role !== "tool").length, 1)
  }, 240_000)

  it("a tool call in flight when its runner dies is answered interrupted on the survivor, never run again", async () => {
    const { a, b, dbUrl, home } = await cluster(true)
    const thread = await (await post(b.url, "/threads", {})).json() as any
    const marker = Path.join(home, "users/default/threads", thread.thread_id, "user-data/workspace/ran.txt")
    const run = await (await post(b.url, `/threads/${thread.thread_id}/runs`, {
      assistant_id: "lead_agent",
      input: { messages: [{ type: "human", content: "Run the slow job" }] }
    })).json() as any
    // the call is saved (before the tool runs) and the command started
    await until(async () => {
      const state = await (await fetch(`${a.url}/threads/${thread.thread_id}/state`)).json() as any
      return state.values.messages.some((m: any) => m.type === "ai" && m.tool_calls?.length > 0) &&
        Fs.existsSync(marker)
    }, "the tool call in flight")
    const { other: survivor, holder: victim } = Cluster.holderOf(dbUrl, thread.thread_id, a, b)
    victim.server.child.kill("SIGKILL")
    await new Promise((resolve) => victim.server.child.once("exit", resolve))

    const record = await ended(survivor.url, thread.thread_id, run.run_id, survivor.server.output)
    assert.strictEqual(record.status, "success", JSON.stringify(record))
    const state = await (await fetch(`${survivor.url}/threads/${thread.thread_id}/state`)).json() as any
    const visible = Support.visible(state.values.messages)
    assert.deepStrictEqual(visible.map((m: any) => m.type), ["human", "ai", "tool", "ai"])
    assert.include(visible[2].content, "interrupted")
    assert.strictEqual(visible[2].tool_call_id, visible[1].tool_calls[0].id)
    assert.strictEqual(visible[3].content, "The slow job was interrupted; I will not run it again.")
    // the command ran once
    assert.strictEqual(Fs.readFileSync(marker, "utf8"), "ran\n")
  }, 240_000)
})
