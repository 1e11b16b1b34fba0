/**
 * DeerFlow's gateway tests about a thread's runs and reads, against `antler serve`. Mirrors
 * test_runs_api_endpoints.py, test_thread_run_query_validation.py, test_thread_run_messages_pagination.py,
 * test_thread_messages_feedback.py, test_run_event_store_filter.py, test_run_event_store_pagination.py,
 * test_thread_regenerate_prepare.py, test_owner_isolation.py and test_stateless_runs_owner_isolation.py, and
 * DeerFlow's routers (uploads.py, thread_runs.py, scheduled_tasks.py, mcp_tasks.py) for a new chat's reads: their
 * `require_permission(owner_check=True)` lets a thread id nobody has through, so a chat whose id the app made up
 * before its first run reads as empty there.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import type { ChatRequestBody, Turn } from "../../../src/layers/ScriptedChatServer.js"
import * as Requests from "../../support/requests.js"
import { ROUTES } from "./routes.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const ALICE = "alice-token-dfruns-00000000"
const BOB = "bob-token-dfruns-0000000000"

let gateway: TestGateway

const alice = Requests.as(() => gateway, ALICE)
const bob = Requests.as(() => gateway, BOB)

beforeAll(async () => {
  gateway = await Support.start({
    script: (body: ChatRequestBody): Turn => {
      const text = JSON.stringify(body.messages)
      const last = body.messages.at(-1)
      // two subagents: each looks once (a tool call), then answers
      if (text.includes("general-purpose subagent")) {
        if (last?.role === "tool") return text.includes("task alpha") ? "Alpha done." : "Beta done."
        return { toolCalls: [{ name: "ls", arguments: { description: "look", path: "/mnt/user-data/workspace" } }] }
      }
      if (text.includes("delegate twice")) {
        if (last?.role === "tool") return "Both done."
        const task = (name: string) => ({
          name: "task",
          arguments: { description: name, prompt: `task ${name}: list the workspace`, subagent_type: "general-purpose" }
        })
        return { toolCalls: [task("alpha"), task("beta")] }
      }
      if (JSON.stringify(last?.content ?? "").includes("which city")) {
        const args = { question: "Which city?", clarification_type: "approach_choice", options: ["Paris", "Rome"] }
        return { toolCalls: [{ name: "ask_clarification", arguments: args }] }
      }
      return "Here you go."
    },
    config: (url) => ({
      gateway: { auth: { tokens: [{ token: ALICE, user: "alice" }, { token: BOB, user: "bob" }] } },
      models: [{ name: "scripted", model: "scripted", base_url: url, api_key: "sk-test-scripted-key-000000",
        context_window: 100_000 }]
    })
  })
  // bob's chat, with a run, an upload and a scheduled task on it
  assert.strictEqual((await bob("POST", "/api/threads", { thread_id: "bobs-chat" })).status, 200)
  const run = await bob("POST", "/api/threads/bobs-chat/runs", { input: Support.userInput("hello") })
  assert.strictEqual(run.status, 200, run.text)
  await bob("GET", `/api/threads/bobs-chat/runs/${run.json().run_id}/join`)
  const form = new FormData()
  form.append("files", new Blob(["bob's notes"]), "notes.txt")
  assert.strictEqual((await bob("POST", "/api/threads/bobs-chat/uploads", form)).status, 200)
  const task = {
    title: "daily",
    prompt: "summarise",
    schedule_type: "cron",
    schedule_spec: { cron: "0 9 * * *" },
    timezone: "UTC",
    context_mode: "reuse_thread",
    thread_id: "bobs-chat"
  }
  const made = await bob("POST", "/api/scheduled-tasks", task)
  assert.strictEqual(made.status, 200, made.text)
})
afterAll(() => gateway?.stop())

/** What alice reads of a thread id's uploads, messages, token usage and scheduled tasks. */
const newChatReads = async (threadId: string) => ({
  uploads: await alice("GET", `/api/threads/${threadId}/uploads/list`),
  page: await alice("GET", `/api/threads/${threadId}/messages/page`),
  usage: await alice("GET", `/api/threads/${threadId}/token-usage`),
  tasks: await alice("GET", `/api/threads/${threadId}/scheduled-tasks`),
  mcpTasks: await alice("GET", `/api/threads/${threadId}/mcp-tasks`)
})

describe("a new chat's thread, before its first run", () => {
  it("reads as empty: no uploads, no messages, no tokens, no scheduled tasks (DeerFlow's answers)", async () => {
    const reads = await newChatReads("6f1c2d3e-new-chat")
    for (const [name, answer] of Object.entries(reads)) {
      assert.strictEqual(answer.status, 200, `${name}: ${answer.text}`)
    }
    assert.deepStrictEqual(reads.uploads.json(), { files: [], count: 0 })
    assert.deepStrictEqual(reads.page.json(), { data: [], has_more: false, next_before_seq: null })
    const usage = reads.usage.json()
    assert.strictEqual(usage.thread_id, "6f1c2d3e-new-chat")
    assert.strictEqual(usage.total_tokens, 0)
    assert.strictEqual(usage.total_runs, 0)
    assert.deepStrictEqual(usage.by_model, {})
    // (the gauge of an empty context, of the model a run would use)
    assert.deepStrictEqual(usage.context_usage, { token_count: 0, max_context_tokens: 100_000, percentage: 0 })
    assert.deepStrictEqual(reads.tasks.json(), [])
    assert.deepStrictEqual(reads.mcpTasks.json(), [])
    // reading made no thread
    assert.strictEqual((await alice("GET", "/api/threads/6f1c2d3e-new-chat")).status, 404)
    assert.strictEqual((await alice("POST", "/api/threads", { thread_id: "6f1c2d3e-new-chat" })).status, 200)
  })

  it("another user's thread reads exactly as a new chat's: nothing of it shows", async () => {
    const theirs = await newChatReads("bobs-chat")
    const nobodys = await newChatReads("nobodys-chat")
    for (const key of ["uploads", "page", "tasks", "mcpTasks"] as const) {
      assert.strictEqual(theirs[key].status, 200)
      assert.deepStrictEqual(theirs[key].json(), nobodys[key].json(), key)
    }
    assert.deepStrictEqual(
      { ...theirs.usage.json(), thread_id: "x" },
      { ...nobodys.usage.json(), thread_id: "x" }
    )
    // bob still reads his own
    assert.strictEqual((await bob("GET", "/api/threads/bobs-chat/uploads/list")).json().count, 1)
    assert.strictEqual((await bob("GET", "/api/threads/bobs-chat/messages/page")).json().data.length, 2)
    assert.isAbove((await bob("GET", "/api/threads/bobs-chat/token-usage")).json().total_runs, 0)
    assert.strictEqual((await bob("GET", "/api/threads/bobs-chat/scheduled-tasks")).json().length, 1)
  })

  it("an id no new thread could have is still a 404 (the server's own `.u` ids too)", async () => {
    for (const id of ["has space", "chat.u0123456789ab", "-dash-first", "x".repeat(115)]) {
      const reads = await newChatReads(encodeURIComponent(id))
      for (const [name, answer] of Object.entries(reads)) assert.strictEqual(answer.status, 404, `${id} ${name}`)
    }
  })

  it("a new chat's page still refuses DeerFlow's bad queries (after_seq, a limit of 0)", async () => {
    assert.strictEqual((await alice("GET", "/api/threads/fresh-chat/messages/page?after_seq=1")).status, 422)
    assert.strictEqual((await alice("GET", "/api/threads/fresh-chat/messages/page?limit=0")).status, 422)
  })
})

describe("a run's events of one subagent task (DeerFlow's subtask card, fetched on expand)", () => {
  it("task_id keeps that task's events; with after_seq and a small limit it pages with no gap or repeat", async () => {
    assert.strictEqual((await alice("POST", "/api/threads", { thread_id: "tasks" })).status, 200)
    const input = { messages: [{ type: "human", content: "delegate twice" }] }
    const run = await alice("POST", "/api/threads/tasks/runs/wait", { input, context: { subagent_enabled: true } })
    assert.strictEqual(run.status, 200, run.text)
    const runId = (await alice("GET", "/api/threads/tasks/runs")).json()[0].run_id
    const events = (path: string) => alice("GET", `/api/threads/tasks/runs/${runId}/events${path}`)
    const all: Array<any> = (await events("?limit=2000")).json()
    const starts = all.filter((e) => e.event_type === "subagent.start")
    assert.strictEqual(starts.length, 2, JSON.stringify(all.map((e) => e.event_type)))
    const [alpha, beta] = starts.map((e) => e.metadata.task_id as string)
    assert.isString(alpha)
    assert.notStrictEqual(alpha, beta)
    const ofTask = (id: string) => all.filter((e) => e.metadata.task_id === id)
    assert.isAbove(ofTask(alpha!).filter((e) => e.event_type === "subagent.step").length, 1)

    const filtered: Array<any> = (await events(`?task_id=${alpha}`)).json()
    assert.deepStrictEqual(filtered.map((e) => e.seq), ofTask(alpha!).map((e) => e.seq))
    assert.deepStrictEqual(
      ((await events(`?task_id=${alpha}&event_types=subagent.step`)).json() as Array<any>).map((e) => e.event_type),
      ofTask(alpha!).filter((e) => e.event_type === "subagent.step").map(() => "subagent.step")
    )
    // page by page, two at a time, as the card backfills: every step of the task once, in order
    const collected: Array<any> = []
    let after = ""
    for (let i = 0; i < 50; i++) {
      const answer = await events(`?task_id=${alpha}&event_types=subagent.step&limit=2${after}`)
      const page: Array<any> = answer.json()
      assert.isArray(page, answer.text)
      collected.push(...page)
      if (page.length < 2) break
      after = `&after_seq=${page.at(-1).seq}`
    }
    assert.deepStrictEqual(
      collected.map((e) => e.seq),
      ofTask(alpha!).filter((e) => e.event_type === "subagent.step").map((e) => e.seq)
    )
    assert.isTrue(collected.every((e) => e.metadata.task_id === alpha))
    // after_seq alone: the events after it, all of them (a cursor of 0 is a 422 in both)
    assert.strictEqual((await events("?after_seq=0")).status, 422)
    const cursor = all[2].seq
    assert.deepStrictEqual(
      ((await events(`?after_seq=${cursor}&limit=2000`)).json() as Array<any>).map((e) => e.seq),
      all.slice(3).map((e) => e.seq)
    )
  }, 30_000)
})

describe("a run whose config.configurable is null (DeerFlow's test_runs_api_endpoints)", () => {
  it("runs, on a thread and stateless, where DeerFlow's gateway once failed with a 500", async () => {
    assert.strictEqual((await alice("POST", "/api/threads", { thread_id: "nulls" })).status, 200)
    const body = { input: Support.userInput("hi"), config: { configurable: null } }
    const onThread = await alice("POST", "/api/threads/nulls/runs/wait", body)
    assert.strictEqual(onThread.status, 200, onThread.text)
    assert.strictEqual(onThread.json().messages.at(-1).content, "Here you go.")
    const stateless = await alice("POST", "/api/runs/wait", { ...body, config: { configurable: null, tags: null } })
    assert.strictEqual(stateless.status, 200, stateless.text)
    assert.strictEqual(stateless.json().messages.at(-1).content, "Here you go.")
  })
})

describe("an edit of an edited question (DeerFlow's test_thread_regenerate_prepare)", () => {
  it("keeps the first question's edit_version_group_id, read from the source run's metadata", async () => {
    assert.strictEqual((await alice("POST", "/api/threads", { thread_id: "edits" })).status, 200)
    const first = await alice("POST", "/api/threads/edits/runs/wait", { input: Support.userInput("first question") })
    assert.strictEqual(first.status, 200, first.text)
    const shown = async () =>
      ((await alice("GET", "/api/threads/edits/messages/page")).json().data as Array<any>).map((row) => row.content)
    const prepare = async (text: string) => {
      const question = (await shown()).findLast((m) => m.type === "human")
      const answer = await alice("POST", "/api/threads/edits/runs/edit-regenerate/prepare", {
        human_message_id: question.id,
        replacement_text: text
      })
      assert.strictEqual(answer.status, 200, answer.text)
      return { question, prepared: answer.json() }
    }
    const once = await prepare("  first question, edited \n")
    assert.deepStrictEqual(once.prepared.input.messages[0].content, [{ type: "text", text: "first question, edited" }])
    assert.strictEqual(once.prepared.metadata.edit_from_message_id, once.question.id)
    assert.strictEqual(once.prepared.metadata.edit_version_group_id, once.question.id)
    const rerun = await alice("POST", "/api/threads/edits/runs/wait", {
      input: once.prepared.input,
      checkpoint: once.prepared.checkpoint,
      metadata: once.prepared.metadata
    })
    assert.strictEqual(rerun.status, 200, rerun.text)
    const twice = await prepare("first question, edited again")
    // (the replacement, a thread's first question, kept as `{id}__user` as DeerFlow's dynamic context keys it)
    assert.strictEqual(twice.question.id, `${once.prepared.replacement_human_message_id}__user`)
    assert.strictEqual(twice.prepared.metadata.edit_from_message_id, twice.question.id)
    assert.strictEqual(twice.prepared.metadata.edit_version_group_id, once.question.id)
    // DeerFlow's refusals, with its words
    const unchanged = await alice("POST", "/api/threads/edits/runs/edit-regenerate/prepare", {
      human_message_id: twice.question.id,
      replacement_text: "  first question, edited  "
    })
    assert.strictEqual(unchanged.status, 409)
    assert.include(unchanged.json().detail, "Edited message is unchanged")
    const empty = await alice("POST", "/api/threads/edits/runs/edit-regenerate/prepare", {
      human_message_id: twice.question.id,
      replacement_text: " \n\t"
    })
    assert.strictEqual(empty.status, 409)
    assert.include(empty.json().detail, "Edited message cannot be empty")
    // nor while the thread pursues a goal
    assert.strictEqual((await alice("PUT", "/api/threads/edits/goal", { objective: "Finish it" })).status, 200)
    const goal = await alice("POST", "/api/threads/edits/runs/edit-regenerate/prepare", {
      human_message_id: twice.question.id,
      replacement_text: "another edit"
    })
    assert.strictEqual(goal.status, 409)
    assert.include(goal.json().detail, "Cannot edit while a goal is active")
  })
})

describe("the read endpoints' queries (DeerFlow's test_thread_run_query_validation)", () => {
  it("refuse a limit or a seq cursor that is not positive, and a page past 200, with a 422 naming it", async () => {
    const runId = (await bob("GET", "/api/threads/bobs-chat/runs")).json()[0].run_id
    const events = `/api/threads/bobs-chat/runs/${runId}/events`
    for (const path of [
      `${events}?limit=0`,
      `${events}?limit=-1`,
      `${events}?after_seq=0`,
      `${events}?after_seq=-1`,
      "/api/threads/bobs-chat/messages/page?limit=0",
      "/api/threads/bobs-chat/messages/page?limit=201",
      "/api/threads/bobs-chat/messages/page?before_seq=0",
      "/api/threads/bobs-chat/messages/page?before_seq=-1"
    ]) {
      const answer = await bob("GET", path)
      assert.strictEqual(answer.status, 422, `${path}: ${answer.text}`)
      const name = path.match(/[?&](\w+)=/)![1]!
      assert.include(answer.json().detail, name, path)
    }
    const one = await bob("GET", `${events}?limit=1`)
    assert.strictEqual(one.json().length, 1)
    assert.strictEqual((await bob("GET", "/api/threads/bobs-chat/messages/page?limit=1")).json().data.length, 1)
  })
})

describe("editing around a clarification question (DeerFlow's test_thread_regenerate_prepare)", () => {
  it("an open question's turn is not edited; once answered, a later question is", async () => {
    assert.strictEqual((await alice("POST", "/api/threads", { thread_id: "clarify" })).status, 200)
    const asked = await alice("POST", "/api/threads/clarify/runs/wait", { input: Support.userInput("which city?") })
    assert.strictEqual(asked.status, 200, asked.text)
    const page = async () =>
      ((await alice("GET", "/api/threads/clarify/messages/page")).json().data as Array<any>).map((row) => row.content)
    const edit = (humanId: string, text: string) =>
      alice("POST", "/api/threads/clarify/runs/edit-regenerate/prepare", {
        human_message_id: humanId,
        replacement_text: text
      })
    const open = await edit((await page())[0].id, "which town?")
    assert.strictEqual(open.status, 409)
    assert.include(open.json().detail, "Only completed assistant text turns can be edited")
    // answered (a hidden answer), then a question of its own
    const answered = await alice("POST", "/api/threads/clarify/runs/wait", { command: { resume: "2" } })
    assert.strictEqual(answered.status, 200, answered.text)
    const latest = await alice("POST", "/api/threads/clarify/runs/wait", { input: Support.userInput("and then?") })
    assert.strictEqual(latest.status, 200, latest.text)
    const runId = (await alice("GET", "/api/threads/clarify/runs")).json()[0].run_id
    const rows = await page()
    const [question, answer] = rows.slice(-2)
    assert.deepStrictEqual([question.type, answer.type], ["human", "ai"])
    const prepared = await edit(question.id, "and after that?")
    assert.strictEqual(prepared.status, 200, prepared.text)
    assert.deepStrictEqual(prepared.json().source_message_ids, [question.id, answer.id])
    assert.strictEqual(prepared.json().target_run_id, runId)
  })
})

describe("a path naming an id no thread could have (DeerFlow's test_thread_id_route_contract)", () => {
  // DeerFlow answers a non-canonical id with a 422 naming thread_id; Antler's ids differ (docs/deerflow.md), and a
  // path naming one no thread of the user's could have is a 404, or a 422 where the route would make the thread
  it("is refused on every thread route under /api, and no thread is made", async () => {
    const before = (await alice("POST", "/api/threads/search", { limit: 1000 })).json().length
    const bodyOf = (route: (typeof ROUTES)[number]) => {
      if (route.method === "GET" || route.method === "DELETE") return undefined
      if (route.body === "upload") {
        const form = new FormData()
        form.append("files", new Blob(["x"]), "x.txt")
        return form
      }
      return route.body === "goal" ? { objective: "x" } : {}
    }
    for (const id of ["bad%20id", "-dash-first", "chat.u0123456789ab", "x".repeat(115)]) {
      for (const route of ROUTES.filter((r) => r.path.startsWith("/api/threads/:thread_id"))) {
        // (the server's upload limits, which no thread changes, as DeerFlow's are)
        if (route.path.endsWith("/uploads/limits")) continue
        const path = route.path.replace(":thread_id", id).replace(/:\w+/g, "x").replace("*", "mnt/user-data/x")
        const answer = await alice(route.method, path, bodyOf(route))
        assert.oneOf(answer.status, [404, 422], `${route.method} ${route.path} (${id}): ${answer.text}`)
        // (a route that makes the thread names what is wrong with its id)
        if ((route.body === "upload" || route.body === "goal") && answer.status === 422) {
          assert.include(answer.json().detail, "thread_id", route.path)
        }
      }
    }
    assert.strictEqual((await alice("POST", "/api/threads/search", { limit: 1000 })).json().length, before)
    const goal = await alice("PUT", "/api/threads/chat.u0123456789ab/goal", { objective: "x" })
    assert.strictEqual(goal.status, 422)
    assert.include(goal.json().detail, "thread_id")
  })
})
