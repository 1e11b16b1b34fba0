/**
 * LangGraph API calls of the real `@langchain/langgraph-sdk` Client answered as LangGraph's own API server
 * (`@langchain/langgraph-api`) answers them, by a gateway with two token users: an unknown assistant, `select`,
 * runs' `kwargs` and `metadata`, `threads.count`, `threads.copy` and `runs.delete`. Each user reaches only their
 * own threads and runs: the other's are, for them, ones that do not exist. The model is SCRIPTED.
 */
import type { Client } from "@langchain/langgraph-sdk"
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Fs from "node:fs"
import * as Path from "node:path"
import type { ChatRequestBody, Turn } from "../../../src/layers/ScriptedChatServer.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const { ALICE, lastUserText, statusOf } = Support
const SECRET = "sk-live-very-secret-0123456789"

const script = (body: ChatRequestBody): Turn => {
  const text = lastUserText(body)
  if (text.includes("hang")) return { content: "working", stall: true }
  // "write NAME": a file of that name in the thread's outputs, then presented (else the run fails its delivery)
  const write = /write (\w+)/.exec(text)
  const last = body.messages.at(-1)
  if (write !== null && last?.role !== "tool") {
    const path = `/mnt/user-data/outputs/${write[1]}.md`
    return { toolCalls: [{ name: "write_file", arguments: { description: "save", path, content: "notes\n" } }] }
  }
  if (write !== null && (body.messages.at(-2) as any)?.tool_calls?.[0]?.function?.name === "write_file") {
    const path = `/mnt/user-data/outputs/${write[1]}.md`
    return { toolCalls: [{ name: "present_files", arguments: { filepaths: [path] } }] }
  }
  return `You said: ${text}`
}

let gateway: TestGateway
let alice: Client
let bob: Client

beforeAll(async () => {
  // a secret the configuration knows: never stored, never answered
  ;({ alice, bob, gateway } = await Support.startTwoUsers(script, {
    tracing: { enabled: false, headers: { authorization: SECRET } }
  }))
})
afterAll(() => gateway?.stop())

const human = (content: string) => ({ messages: [{ type: "human", content }] })

/** The error a call failed with. */
const errorOf = (call: Promise<unknown>): Promise<{ status?: number; message: string }> =>
  call.then(() => assert.fail("the call succeeded"), (error) => error)

describe("an unknown assistant", () => {
  // LangGraph answers 404 ("No assistant found for ...") for a run of an assistant it does not have; the gateway
  // answered 422 (its agent settings were refused)
  it("in a run is a 404 naming it, for a thread's run and a stateless one; nothing is started", async () => {
    const thread = await alice.threads.create()
    const refused = await errorOf(alice.runs.create(thread.thread_id, "no-such-agent", { input: human("hi") }))
    assert.strictEqual(refused.status, 404)
    assert.include(refused.message, `No assistant found for \\"no-such-agent\\"`)
    assert.deepStrictEqual(await alice.runs.list(thread.thread_id), [])
    assert.strictEqual(await statusOf(alice.runs.wait(null, "No_Such_Agent", { input: human("hi") })), 404)
    assert.strictEqual(await statusOf(alice.assistants.get("no-such-agent")), 404)
  })

  it("is one another user has (their custom agent), and the lead agent is everyone's", async () => {
    const dir = Path.join(gateway.home, "users", "bob", "agents", "bobs-helper")
    Fs.mkdirSync(dir, { recursive: true })
    Fs.writeFileSync(Path.join(dir, "config.yaml"), "name: bobs-helper\n")
    const thread = await alice.threads.create()
    assert.strictEqual(await statusOf(alice.runs.wait(thread.thread_id, "bobs-helper", { input: human("hi") })), 404)
    assert.strictEqual(await statusOf(alice.assistants.get("bobs-helper")), 404)
    // named as a run names it (lower-cased, hyphenated), as the run does
    assert.strictEqual((await bob.assistants.get("Bobs_Helper")).assistant_id, "Bobs_Helper")
    const bobs = await bob.threads.create()
    await bob.runs.wait(bobs.thread_id, "Bobs_Helper", { input: human("hi") })
    assert.strictEqual((await bob.runs.list(bobs.thread_id))[0]?.status, "success")
    // an agent named in the run's context (not its assistant) stays a settings problem: 422
    const named = await errorOf(
      alice.runs.wait(thread.thread_id, "lead_agent", { input: human("hi"), context: { agent_name: "nobody" } })
    )
    assert.strictEqual(named.status, 422)
  })
})

describe("select", () => {
  // `select` names the fields of each object found; it was ignored, and every field was answered
  it("answers only the selected fields of threads, assistants and runs; an unknown field is a 422", async () => {
    const thread = await alice.threads.create({ metadata: { purpose: "select" } })
    await alice.runs.wait(thread.thread_id, "lead_agent", { input: human("hello") })
    const threads = await alice.threads.search({ metadata: { purpose: "select" }, select: ["thread_id", "status"] })
    assert.deepStrictEqual(threads, [{ thread_id: thread.thread_id, status: "idle" }] as any)

    const assistants = await alice.assistants.search({ select: ["assistant_id", "graph_id"] })
    assert.deepStrictEqual(assistants, [{ assistant_id: "lead_agent", graph_id: "lead_agent" }] as any)

    const [run] = await alice.runs.list(thread.thread_id)
    const runs = await alice.runs.list(thread.thread_id, { select: ["run_id", "status"] })
    assert.deepStrictEqual(runs, [{ run_id: run!.run_id, status: "success" }] as any)
    // none selected: every field
    assert.deepStrictEqual(Object.keys((await alice.threads.search({ ids: [thread.thread_id] }))[0]!).sort(), [
      "created_at", "interrupts", "metadata", "status", "thread_id", "updated_at", "values"
    ])

    for (
      const call of [
        () => alice.threads.search({ select: ["thread_id", "password" as any] }),
        () => alice.assistants.search({ select: ["password" as any] }),
        () => alice.runs.list(thread.thread_id, { select: ["password" as any] })
      ]
    ) {
      const refused = await errorOf(call())
      assert.strictEqual(refused.status, 422)
      assert.include(refused.message, `actual \\"password\\"`)
      assert.include(refused.message, "one of")
    }
  })
})

describe("a run's kwargs and metadata", () => {
  // LangGraph's Run object carries what the run was asked with (`kwargs`) and its metadata over the thread's; the
  // gateway answered `kwargs: {}` and the run's metadata alone
  it("come back on runs.get and runs.list as LangGraph's, secrets redacted, the run's user's only", async () => {
    const thread = await alice.threads.create({ metadata: { project: "fells" } })
    const input = human(`remember ${SECRET}`)
    const run = await alice.runs.create(thread.thread_id, "lead_agent", {
      input,
      metadata: { purpose: "kwargs" },
      config: { configurable: { model_name: "scripted" }, recursion_limit: 30 },
      context: { thinking_enabled: false },
      streamMode: ["values", "messages-tuple"],
      multitaskStrategy: "reject"
    })
    await alice.runs.join(thread.thread_id, run.run_id)
    const metadata = { project: "fells", graph_id: "lead_agent", assistant_id: "lead_agent", purpose: "kwargs" }
    const kwargs = {
      input: human("remember [redacted]"),
      config: {
        configurable: {
          model_name: "scripted",
          graph_id: "lead_agent",
          assistant_id: "lead_agent",
          run_id: run.run_id,
          thread_id: thread.thread_id
        },
        recursion_limit: 30,
        metadata
      },
      context: { thinking_enabled: false },
      stream_mode: ["values", "messages-tuple"],
      temporary: false,
      subgraphs: false,
      resumable: false
    }
    for (const found of [run, await alice.runs.get(thread.thread_id, run.run_id)]) {
      assert.deepStrictEqual(found.metadata, metadata)
      assert.deepStrictEqual((found as any).kwargs, kwargs)
    }
    const [listed] = await alice.runs.list(thread.thread_id)
    assert.deepStrictEqual((listed as any).kwargs, kwargs)
    assert.notInclude(JSON.stringify(await alice.runs.list(thread.thread_id)), SECRET)

    // a stateless run's thread is its own (its metadata the run's), and goes with it
    const stateless = await alice.runs.create(null, "lead_agent", { input: human("hi"), metadata: { once: true } })
    assert.deepStrictEqual(stateless.metadata, { once: true })
    assert.strictEqual((stateless as any).kwargs.temporary, true)

    // bob reads none of it
    assert.strictEqual(await statusOf(bob.runs.get(thread.thread_id, run.run_id)), 404)
    assert.strictEqual(await statusOf(bob.runs.list(thread.thread_id)), 404)
  })
})

describe("a run's request credentials (DeerFlow's test_run_metadata_secret_safety)", () => {
  // `context.secrets` was kept in the run's kwargs and answered by runs.get and runs.list; `metadata.auth_token`
  // was kept in the run's metadata (DeerFlow refuses it with 422 and never answers `context.secrets`)
  it("are never answered: context.secrets is left out of kwargs, metadata.auth_token refused", async () => {
    const token = "request-scoped-token-0123456789"
    const thread = await alice.threads.create()
    const run = await alice.runs.create(thread.thread_id, "lead_agent", {
      input: human("hi"),
      context: { secrets: { MCP_AUTH_TOKEN: token }, thinking_enabled: false }
    })
    await alice.runs.join(thread.thread_id, run.run_id)
    const got = await alice.runs.get(thread.thread_id, run.run_id)
    assert.deepStrictEqual((got as any).kwargs.context, { thinking_enabled: false })
    const listed = await alice.runs.list(thread.thread_id)
    for (const answer of [run, got, listed, await alice.threads.get(thread.thread_id)]) {
      assert.notInclude(JSON.stringify(answer), token)
    }
    const refused = alice.runs.create(thread.thread_id, "lead_agent", {
      input: human("hi"),
      metadata: { auth_token: token, token_usage: 7 }
    })
    assert.strictEqual(await statusOf(refused), 422)
    assert.notInclude(JSON.stringify(await alice.runs.list(thread.thread_id)), token)
    assert.lengthOf(await alice.runs.list(thread.thread_id), 1)

    // nor is a thread's metadata.auth_token the run's (its metadata is over the thread's)
    const tagged = await alice.threads.create({ metadata: { auth_token: token, project: "fells" } })
    const over = await alice.runs.create(tagged.thread_id, "lead_agent", { input: human("hi") })
    await alice.runs.join(tagged.thread_id, over.run_id)
    assert.strictEqual((await alice.runs.get(tagged.thread_id, over.run_id)).metadata?.project, "fells")
    for (const answer of [over, await alice.runs.list(tagged.thread_id)]) {
      assert.notInclude(JSON.stringify(answer), token)
    }
  })
})

describe("a run's config.context (DeerFlow's test_skill_request_scoped_secrets, TestSecretCarrier)", () => {
  // DeerFlow's clients put a run's settings and its request-scoped secrets in `config.context` (LangGraph 0.6's
  // place for them), which DeerFlow's gateway reads over `context` and keeps without `secrets`; the gateway dropped
  // the settings there, and accepted `config.metadata.auth_token`, which DeerFlow refuses as it does `metadata`'s
  it("gives the run its settings, is answered without secrets, and config.metadata.auth_token is refused", async () => {
    const token = "request-scoped-token-9876543210"
    const thread = await alice.threads.create()
    const unknown = await errorOf(alice.runs.create(thread.thread_id, "lead_agent", {
      input: human("hi"),
      config: { context: { model_name: "no-such-model" } } as any
    }))
    assert.strictEqual(unknown.status, 400)
    assert.include(unknown.message, "Unknown model")
    // a made-up name of 100,000 characters is repeated as its first 199 and "…", not echoed whole
    const long = await errorOf(alice.runs.create(thread.thread_id, "lead_agent", {
      input: human("hi"),
      config: { context: { model_name: "m".repeat(100_000) } } as any
    }))
    assert.strictEqual(long.status, 400)
    assert.include(long.message, `${"m".repeat(199)}…`)
    assert.notInclude(long.message, "m".repeat(200))
    assert.isBelow(long.message.length, 1_000)
    const run = await alice.runs.create(thread.thread_id, "lead_agent", {
      input: human("hi"),
      context: { thinking_enabled: true },
      config: {
        context: { secrets: { ERP_TOKEN: token }, __active_skill_secrets: { ERP_TOKEN: token }, model_name: "scripted" }
      } as any
    })
    await alice.runs.join(thread.thread_id, run.run_id)
    const got = await alice.runs.get(thread.thread_id, run.run_id)
    assert.deepStrictEqual((got as any).kwargs.config.context, { model_name: "scripted" })
    const listed = await alice.runs.list(thread.thread_id)
    for (const answer of [run, got, listed, await alice.threads.get(thread.thread_id)]) {
      assert.notInclude(JSON.stringify(answer), token)
    }
    const refused = alice.runs.create(thread.thread_id, "lead_agent", {
      input: human("hi"),
      config: { metadata: { auth_token: token } } as any
    })
    assert.strictEqual(await statusOf(refused), 422)
    assert.lengthOf(await alice.runs.list(thread.thread_id), 1)
  })
})

describe("threads.count", () => {
  // `POST /threads/count` had no route (404)
  it("counts the user's threads the filters keep, never another user's", async () => {
    const tag = { count: crypto.randomUUID() }
    const first = await alice.threads.create({ metadata: tag })
    await alice.threads.create({ metadata: tag })
    await alice.threads.updateState(first.thread_id, { values: { title: "Counted" } })
    await bob.threads.create({ metadata: tag })
    assert.strictEqual(await alice.threads.count({ metadata: tag }), 2)
    assert.strictEqual(await alice.threads.count({ metadata: tag, values: { title: "Counted" } }), 1)
    assert.strictEqual(await alice.threads.count({ metadata: tag, status: "busy" }), 0)
    assert.strictEqual(await bob.threads.count({ metadata: tag }), 1)
    // every thread of hers, as a search finds them
    const all = await alice.threads.search({ limit: 1000 })
    assert.strictEqual(await alice.threads.count(), all.length)
    // a filter of the wrong shape: 422
    const refused = await errorOf(alice.threads.count({ metadata: "x" as any }))
    assert.strictEqual(refused.status, 422)
  })
})

/** Waits until run `runId` of alice's thread is `running`. */
const runningSoon = async (threadId: string, runId: string) => {
  for (let i = 0; i < 400; i++) {
    if ((await alice.runs.get(threadId, runId)).status === "running") return
    await new Promise((resolve) => setTimeout(resolve, 25))
  }
  assert.fail(`run ${runId} never ran`)
}

describe("runs.delete", () => {
  // `DELETE /threads/{id}/runs/{run_id}` had no route (404)
  it("deletes a run that ended (its checkpoints stay); a run going on is a 409; another user's is a 404", async () => {
    const thread = await alice.threads.create()
    await alice.runs.wait(thread.thread_id, "lead_agent", { input: human("first") })
    const [first] = await alice.runs.list(thread.thread_id)
    const before = await alice.threads.getState(thread.thread_id)

    // bob cannot delete it: 404, as if it were not there; it is still there
    assert.strictEqual(await statusOf(bob.runs.delete(thread.thread_id, first!.run_id)), 404)
    assert.strictEqual((await alice.runs.get(thread.thread_id, first!.run_id)).run_id, first!.run_id)
    // nor through a thread of his own
    const bobs = await bob.threads.create()
    assert.strictEqual(await statusOf(bob.runs.delete(bobs.thread_id, first!.run_id)), 404)

    const events = () =>
      fetch(`${gateway.url}/api/threads/${thread.thread_id}/runs/${first!.run_id}/events`, {
        headers: { authorization: `Bearer ${ALICE}` }
      })
    assert.isAbove(((await (await events()).json()) as Array<unknown>).length, 0)
    await alice.runs.delete(thread.thread_id, first!.run_id)
    assert.strictEqual(await statusOf(alice.runs.get(thread.thread_id, first!.run_id)), 404)
    assert.strictEqual((await events()).status, 404)
    assert.deepStrictEqual(await alice.runs.list(thread.thread_id), [])
    assert.strictEqual(await statusOf(alice.runs.delete(thread.thread_id, first!.run_id)), 404)
    // the thread keeps what the run wrote
    assert.deepStrictEqual((await alice.threads.getState(thread.thread_id)).values, before.values)

    // a run going on: 409, until it is cancelled
    const hanging = await alice.runs.create(thread.thread_id, "lead_agent", { input: human("hang on") })
    await runningSoon(thread.thread_id, hanging.run_id)
    const refused = await errorOf(alice.runs.delete(thread.thread_id, hanging.run_id))
    assert.strictEqual(refused.status, 409)
    assert.include(refused.message, "has not ended")
    assert.strictEqual((await alice.runs.get(thread.thread_id, hanging.run_id)).status, "running")
    await alice.runs.cancel(thread.thread_id, hanging.run_id, true)
    await alice.runs.delete(thread.thread_id, hanging.run_id)
    assert.deepStrictEqual(await alice.runs.list(thread.thread_id), [])
  })
})

describe("run options Antler does not carry out", () => {
  // DeerFlow's test_run_request_validation refuses them (422 unsupported_run_option); Antler accepted a webhook
  // and after_seconds and dropped them, so that the client waited for a call that never came, or got its run at once
  it("webhook and after_seconds are a 422 naming the option, and start no run", async () => {
    const thread = await alice.threads.create()
    const hooked = await errorOf(
      alice.runs.create(thread.thread_id, "lead_agent", { input: human("hi"), webhook: "https://example.com/hook" })
    )
    assert.strictEqual(hooked.status, 422)
    assert.include(hooked.message, "Run option 'webhook' is not supported")
    const later = await errorOf(alice.runs.wait(null, "lead_agent", { input: human("hi"), afterSeconds: 30 }))
    assert.strictEqual(later.status, 422)
    assert.include(later.message, "Run option 'after_seconds' is not supported")
    assert.deepStrictEqual(await alice.runs.list(thread.thread_id), [])
    // the SDK's defaults (stream_resumable: false, null options) are taken
    const ran = await alice.runs.wait(thread.thread_id, "lead_agent", { input: human("hi") })
    assert.isObject(ran)
  })
})

describe("runs.cancel", () => {
  // DeerFlow's test_cancel_run_idempotent: cancelling an interrupted run again is a 202 (the client's second
  // stop, or a retry), not a 409; a run that ended otherwise is a 409 naming its status; no run of hers a 404
  it("answers 202 again for a cancelled run, 409 for one that succeeded, 404 for none", async () => {
    const thread = await alice.threads.create()
    const hanging = await alice.runs.create(thread.thread_id, "lead_agent", { input: human("hang on") })
    await runningSoon(thread.thread_id, hanging.run_id)
    const cancel = (runId: string, wait = false) =>
      fetch(`${gateway.url}/threads/${thread.thread_id}/runs/${runId}/cancel${wait ? "?wait=true" : ""}`, {
        method: "POST",
        headers: { authorization: `Bearer ${ALICE}` }
      })
    assert.strictEqual((await cancel(hanging.run_id)).status, 202)
    await alice.runs.join(thread.thread_id, hanging.run_id)
    assert.strictEqual((await alice.runs.get(thread.thread_id, hanging.run_id)).status, "interrupted")
    assert.strictEqual((await cancel(hanging.run_id)).status, 202)
    // with wait, 204 (no body), as DeerFlow's
    const waited = await cancel(hanging.run_id, true)
    assert.deepStrictEqual([waited.status, await waited.text()], [204, ""])

    await alice.runs.wait(thread.thread_id, "lead_agent", { input: human("hello") })
    const [done] = await alice.runs.list(thread.thread_id)
    assert.strictEqual(done!.status, "success")
    const refused = await cancel(done!.run_id)
    assert.strictEqual(refused.status, 409)
    assert.include(((await refused.json()) as { detail: string }).detail, "not cancellable (status: success)")
    assert.strictEqual((await cancel("no-such-run")).status, 404)
    // another user's cancel of her run is a 404, and leaves it as it was
    const bobs = await fetch(`${gateway.url}/threads/${thread.thread_id}/runs/${hanging.run_id}/cancel`, {
      method: "POST",
      headers: { authorization: `Bearer ${Support.BOB}` }
    })
    assert.strictEqual(bobs.status, 404)
  })
})

describe("a /wait client that goes away", () => {
  // DeerFlow's test_wait_disconnect_handling: on_disconnect "cancel" (the default) cancels the run the client
  // waited for; "continue" lets it run on
  it("cancels its run by default, and leaves it running with on_disconnect: continue", async () => {
    const waitAndLeave = async (threadId: string, onDisconnect?: string) => {
      const abort = new AbortController()
      const body = {
        assistant_id: "lead_agent",
        input: human("hang on"),
        ...(onDisconnect ? { on_disconnect: onDisconnect } : {})
      }
      const waiting = fetch(`${gateway.url}/threads/${threadId}/runs/wait`, {
        method: "POST",
        headers: { authorization: `Bearer ${ALICE}`, "content-type": "application/json" },
        body: JSON.stringify(body),
        signal: abort.signal
      }).catch(() => undefined)
      let runs: ReadonlyArray<{ run_id: string; status: string }> = []
      for (let i = 0; i < 400 && runs[0]?.status !== "running"; i++) {
        await new Promise((resolve) => setTimeout(resolve, 25))
        runs = await alice.runs.list(threadId)
      }
      assert.strictEqual(runs[0]?.status, "running")
      abort.abort()
      await waiting
      return runs[0]!.run_id
    }
    const cancelled = await alice.threads.create()
    const first = await waitAndLeave(cancelled.thread_id)
    let status = ""
    for (let i = 0; i < 400 && status !== "interrupted"; i++) {
      await new Promise((resolve) => setTimeout(resolve, 25))
      status = (await alice.runs.get(cancelled.thread_id, first)).status
    }
    assert.strictEqual(status, "interrupted")

    const continued = await alice.threads.create()
    const second = await waitAndLeave(continued.thread_id, "continue")
    await new Promise((resolve) => setTimeout(resolve, 300))
    assert.strictEqual((await alice.runs.get(continued.thread_id, second)).status, "running")
    await alice.runs.cancel(continued.thread_id, second, true)
  })
})

describe("stopping a run by its stream", () => {
  // DeerFlow's stop (test_cancel_run_idempotent's stream_existing_run): `POST .../stream?action=interrupt` cancels
  // the run, then streams what is left of it; a second stop is no 409; a run that succeeded is
  it("cancels, then streams to the end; again is no conflict; with wait a 204", async () => {
    const thread = await alice.threads.create()
    const hanging = await alice.runs.create(thread.thread_id, "lead_agent", { input: human("hang on") })
    await runningSoon(thread.thread_id, hanging.run_id)
    const stop = (runId: string, query: string) =>
      fetch(`${gateway.url}/threads/${thread.thread_id}/runs/${runId}/stream?${query}`, {
        method: "POST",
        headers: { authorization: `Bearer ${ALICE}` }
      })
    const stopped = await stop(hanging.run_id, "action=interrupt")
    assert.strictEqual(stopped.status, 200)
    assert.include(await stopped.text(), "event: end")
    assert.strictEqual((await alice.runs.get(thread.thread_id, hanging.run_id)).status, "interrupted")
    const again = await stop(hanging.run_id, "action=interrupt")
    assert.strictEqual(again.status, 200)
    await again.text()
    assert.strictEqual((await stop(hanging.run_id, "action=interrupt&wait=true")).status, 204)

    const second = await alice.runs.create(thread.thread_id, "lead_agent", { input: human("hang on") })
    await runningSoon(thread.thread_id, second.run_id)
    assert.strictEqual((await stop(second.run_id, "action=rollback&wait=1")).status, 204)
    assert.strictEqual((await alice.runs.get(thread.thread_id, second.run_id)).status, "error")
    await alice.runs.wait(thread.thread_id, "lead_agent", { input: human("hello") })
    const [done] = await alice.runs.list(thread.thread_id)
    assert.strictEqual((await stop(done!.run_id, "action=interrupt")).status, 409)
    assert.strictEqual((await stop(done!.run_id, "action=stop")).status, 422)
  })
})

describe("DeerFlow's pinned chats", () => {
  // DeerFlow's test_threads_router: pinning a chat (metadata.deerflow_pinned) does not bump its updated_at, and
  // DeerFlow's /api/threads/search answers pinned chats first, so that the sidebar's first page has them
  it("keep their place in time, and come first in DeerFlow's search (LangGraph's keeps its order)", async () => {
    const call = async (method: string, path: string, body: unknown) => {
      const answer = await fetch(`${gateway.url}${path}`, {
        method,
        headers: { authorization: `Bearer ${Support.BOB}`, "content-type": "application/json" },
        body: JSON.stringify(body)
      })
      assert.strictEqual(answer.status, 200, path)
      return answer.json() as Promise<any>
    }
    const older = await call("POST", "/api/threads", { metadata: { chat: "older" } })
    await new Promise((resolve) => setTimeout(resolve, 20))
    const newer = await call("POST", "/api/threads", { metadata: { chat: "newer" } })
    const pinned = await call("PATCH", `/api/threads/${older.thread_id}`, { metadata: { deerflow_pinned: true } })
    assert.strictEqual(pinned.updated_at, older.updated_at)
    assert.deepStrictEqual(pinned.metadata, { chat: "older", deerflow_pinned: true })
    const first = await call("POST", "/api/threads/search", { limit: 1 })
    assert.deepStrictEqual(first.map((t: any) => t.thread_id), [older.thread_id])
    const langgraph = await call("POST", "/threads/search", { limit: 2 })
    assert.deepStrictEqual(langgraph.map((t: any) => t.thread_id), [newer.thread_id, older.thread_id])
    // another change is activity
    const renamed = await call("PATCH", `/api/threads/${older.thread_id}`, { metadata: { chat: "renamed" } })
    assert.isTrue(renamed.updated_at > older.updated_at)
  })
})

describe("threads.copy", () => {
  // `POST /threads/{id}/copy` had no route (404)
  it("makes a new thread of the user's with the thread's history and files, apart from it; not another's", async () => {
    const thread = await alice.threads.create({ metadata: { purpose: "copy" } })
    const form = new FormData()
    form.append("files", new Blob(["alice's notes\n"]), "notes.txt")
    const uploaded = await fetch(`${gateway.url}/api/threads/${thread.thread_id}/uploads`, {
      method: "POST",
      headers: { authorization: `Bearer ${ALICE}` },
      body: form
    })
    assert.strictEqual(uploaded.status, 200)
    await alice.runs.wait(thread.thread_id, "lead_agent", { input: human("write first") })
    await alice.runs.wait(thread.thread_id, "lead_agent", { input: human("second") })
    const source = await alice.threads.getState(thread.thread_id)
    const sourceHistory = await alice.threads.getHistory(thread.thread_id, { limit: 100 })

    // bob cannot copy it (404, nothing made for him), nor can anyone copy a thread nobody has
    const bobsBefore = await bob.threads.count()
    assert.strictEqual(await statusOf(bob.threads.copy(thread.thread_id)), 404)
    assert.strictEqual(await bob.threads.count(), bobsBefore)
    assert.strictEqual(await statusOf(alice.threads.copy(crypto.randomUUID())), 404)

    const copy = await alice.threads.copy(thread.thread_id)
    assert.notStrictEqual(copy.thread_id, thread.thread_id)
    assert.deepStrictEqual(copy.metadata, {
      purpose: "copy",
      graph_id: "lead_agent",
      assistant_id: "lead_agent",
      thread_id: copy.thread_id
    })
    assert.strictEqual(copy.status, "idle")
    // the same values, but for the sandbox the thread's run bound (the copy's runs get one of their own)
    const unbound = (values: unknown) => ({ ...(values as Record<string, unknown>), sandbox: null })
    assert.isNotNull((source.values as any).sandbox)
    assert.deepStrictEqual(copy.values, unbound(source.values))
    const history = await alice.threads.getHistory(copy.thread_id, { limit: 100 })
    // (the source's newest state has its runs' ids and durations: the copy has none of its runs)
    assert.deepStrictEqual(history.map((s) => s.values), sourceHistory.map((s) => unbound(Support.unstamped(s.values))))
    assert.deepStrictEqual(await alice.runs.list(copy.thread_id), [])
    const listed = await fetch(`${gateway.url}/api/threads/${copy.thread_id}/uploads/list`, {
      headers: { authorization: `Bearer ${ALICE}` }
    })
    assert.deepStrictEqual(((await listed.json()) as any).files.map((f: any) => f.filename), ["notes.txt"])

    // the two go their own ways: the copy's run (in a sandbox of its own) writes the copy's files only
    const output = (threadId: string, name: string) =>
      fetch(`${gateway.url}/api/threads/${threadId}/artifacts/mnt/user-data/outputs/${name}.md`, {
        headers: { authorization: `Bearer ${ALICE}` }
      }).then((response) => response.status)
    assert.strictEqual(await output(copy.thread_id, "first"), 200)
    await alice.runs.wait(copy.thread_id, "lead_agent", { input: human("write third") })
    const [ran] = await alice.runs.list(copy.thread_id)
    assert.strictEqual(ran!.status, "success")
    assert.strictEqual(await output(copy.thread_id, "third"), 200)
    assert.strictEqual(await output(thread.thread_id, "third"), 404)
    const after = (await alice.threads.getState(copy.thread_id)).values as any
    assert.strictEqual(after.messages.at(-1).type, "ai")
    assert.deepStrictEqual((await alice.threads.getState(thread.thread_id)).values, source.values)
    // and bob sees neither
    assert.strictEqual(await statusOf(bob.threads.get(copy.thread_id)), 404)
  })
})
