/**
 * How a gateway run's record and stream end once its turns are over, as DeerFlow's worker ends them
 * (runs/worker.py, test_run_worker_delivery.py, test_goal_worker.py): the record is written `running` while the goal
 * loop judges and continues and while the delivery check looks at the outputs, then its final status once, after its
 * `run.delivery` receipt was kept; a run that produced outputs whose receipt could not be kept fails; a run failing
 * the delivery check ends its `events` stream as any failed run's (no graph end, then `error`); a goal's change and
 * the continuation turn after it reach the stream as separate steps; the evaluator's tokens are none of the run's.
 *
 * What the store held is read from the real SQLite file: a trigger records each status the run's record was written
 * with, and whether its receipt was kept by then; another makes the store refuse the events of some threads.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { createRequire } from "node:module"
import * as Path from "node:path"
import * as Delivery from "../../../src/programs/gateway/Delivery.js"
import type { ChatRequestBody, Turn } from "../../../src/layers/ScriptedChatServer.js"
import { continuations, isEvaluator, verdict } from "../../support/goalScript.js"
import { as } from "../../support/requests.js"
import type { SseEvent, TestGateway } from "./support.js"
import * as Support from "./support.js"

const OUT = "/mnt/user-data/outputs"
const keyOf = (body: ChatRequestBody) =>
  /\[([a-z-]+)\]/.exec(JSON.stringify(body.messages.filter((m) => m.role !== "system")))?.[1] ?? ""
const toolResults = (body: ChatRequestBody) =>
  body.messages.slice(body.messages.findLastIndex((m) => m.role === "user")).filter((m) => m.role === "tool").length
const write = (path: string) => ({ name: "write_file", arguments: { description: "file", path, content: "# Deer\n" } })

// what the agent spends per call, and the evaluator (far more, so that counting it would show)
const AGENT_USAGE = { prompt_tokens: 10, completion_tokens: 5 }
const EVALUATOR_USAGE = { prompt_tokens: 1000, completion_tokens: 100 }

// the gateway's own SQLite file, opened beside it (better-sqlite3, as its store opens it)
interface Database {
  readonly exec: (sql: string) => void
  readonly pragma: (pragma: string) => unknown
  readonly prepare: (sql: string) => { readonly all: (...params: ReadonlyArray<unknown>) => Array<unknown> }
  readonly close: () => void
}
const Sqlite = createRequire(import.meta.url)("better-sqlite3") as new(filename: string) => Database

const judged = new Map<string, number>()
let gateway: TestGateway
let db: Database
const api = as(() => gateway)

beforeAll(async () => {
  gateway = await Support.start({
    script: (body): Turn => {
      const key = keyOf(body)
      if (isEvaluator(body)) {
        const call = (judged.get(key) ?? 0) + 1
        judged.set(key, call)
        // not met after the user's turn, met after the continuation
        return { content: verdict(call >= 2), usage: EVALUATOR_USAGE }
      }
      // the user's turn of a run that writes an output writes it first
      const writes = ["unpresented", "unpresented-events", "receipt-lost"].includes(key)
      if (writes && continuations(body) === 0 && toolResults(body) === 0) {
        return { toolCalls: [write(`${OUT}/${key}.md`)], usage: AGENT_USAGE }
      }
      // (the run whose receipt is lost presents what it wrote: it delivered, as far as its tools tell)
      if (key === "receipt-lost" && toolResults(body) === 1) {
        return { toolCalls: [{ name: "present_files", arguments: { filepaths: [`${OUT}/${key}.md`] } }] }
      }
      return { content: `Step ${continuations(body) + 1} of ${key} done.`, usage: AGENT_USAGE }
    }
  })
  db = new Sqlite(Path.join(gateway.home, "antler.sqlite"))
  db.pragma("busy_timeout = 5000")
  db.exec(`
    CREATE TABLE written (run_id TEXT, status TEXT, receipt INTEGER);
    CREATE TRIGGER written_insert AFTER INSERT ON runs BEGIN
      INSERT INTO written VALUES (NEW.run_id, NEW.status,
        (SELECT count(*) FROM run_events WHERE run_id = NEW.run_id AND instr(events, '"run.delivery"') > 0));
    END;
    CREATE TRIGGER written_update AFTER UPDATE ON runs BEGIN
      INSERT INTO written VALUES (NEW.run_id, NEW.status,
        (SELECT count(*) FROM run_events WHERE run_id = NEW.run_id AND instr(events, '"run.delivery"') > 0));
    END;
    CREATE TRIGGER refused_insert BEFORE INSERT ON run_events WHEN NEW.thread_id LIKE 'lost-%' BEGIN
      SELECT RAISE(ABORT, 'database or disk is full');
    END;
    CREATE TRIGGER refused_update BEFORE UPDATE ON run_events WHEN NEW.thread_id LIKE 'lost-%' BEGIN
      SELECT RAISE(ABORT, 'database or disk is full');
    END;
  `)
})
afterAll(async () => {
  db?.close()
  await gateway?.stop()
})

/** The statuses the store was given for run `runId`, in order, each with whether its receipt was kept by then. */
const writtenOf = (runId: string) =>
  (db.prepare("SELECT status, receipt FROM written WHERE run_id = ? ORDER BY rowid").all(runId) as Array<
    { status: string; receipt: number }
  >)
const TERMINAL = new Set(["success", "error", "cancelled", "interrupted"])

/** A new thread (with a goal, when given) and a streamed run of `question` on it, read to its end. */
const streamRun = async (threadId: string, question: string, modes: ReadonlyArray<string>, goal?: string) => {
  assert.strictEqual((await api("POST", "/api/threads", { thread_id: threadId })).status, 200)
  if (goal !== undefined) {
    assert.strictEqual((await api("PUT", `/api/threads/${threadId}/goal`, { objective: goal })).status, 200)
  }
  const response = await fetch(`${gateway.url}/api/threads/${threadId}/runs/stream`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ input: { messages: [{ type: "human", content: question }] }, stream_mode: modes })
  })
  assert.strictEqual(response.status, 200)
  let runId = ""
  const { events } = await Support.readSse(response, (event: SseEvent) => {
    if (event.event === "metadata") runId = (event.data as any).run_id
    return false
  })
  const run = (await api("GET", `/api/threads/${threadId}/runs/${runId}`)).json()
  return { runId, events, run }
}

describe("a run's record", () => {
  it("says `running` until the goal loop and the delivery check are done, then how the run ended, once", async () => {
    const goal = "Draft [unpresented]"
    const { runId, events, run } = await streamRun("settle-once", "Draft it [unpresented]", ["values"], goal)
    // two turns, both judged: the goal met after the continuation; the output never presented
    assert.strictEqual(judged.get("unpresented"), 2)
    assert.deepInclude(run, { status: "error", error: Delivery.INCOMPLETE })
    assert.deepStrictEqual(events.slice(-2).map((e) => e.event), ["error", "end"])
    const written = writtenOf(runId)
    const terminal = written.filter((w) => TERMINAL.has(w.status))
    // never `success` and then another status: one final write, the last, after the receipt was kept
    assert.deepStrictEqual(terminal, [{ status: "error", receipt: 1 }], JSON.stringify(written))
    assert.deepStrictEqual(written.at(-1), { status: "error", receipt: 1 })
  })

  it("of a goal's run that succeeded is written `success` once, at its end", async () => {
    const { runId, run } = await streamRun("met-once", "Say it [met]", ["values"], "Say [met]")
    assert.strictEqual(judged.get("met"), 2)
    assert.strictEqual(run.status, "success")
    const terminal = writtenOf(runId).filter((w) => TERMINAL.has(w.status))
    assert.deepStrictEqual(terminal, [{ status: "success", receipt: 1 }])
  })
})

describe("a run whose receipt cannot be kept", () => {
  it("fails when it produced outputs, as DeerFlow's fails closed", async () => {
    const { runId, events, run } = await streamRun("lost-outputs", "Write it [receipt-lost]", ["values"])
    assert.deepInclude(run, { status: "error", error: Delivery.RECEIPT_FAILED })
    assert.deepStrictEqual(events.slice(-2).map((e) => e.event), ["error", "end"])
    assert.deepInclude(events.at(-2)!.data as any, { message: Delivery.RECEIPT_FAILED, name: Delivery.ERROR_NAME })
    assert.deepStrictEqual(writtenOf(runId).filter((w) => TERMINAL.has(w.status)), [{ status: "error", receipt: 0 }])
  })

  it("keeps its real status when it produced none", async () => {
    const { runId, events, run } = await streamRun("lost-nothing", "Say it [receipt-kept]", ["values"])
    assert.strictEqual(run.status, "success")
    assert.notInclude(events.map((e) => e.event), "error")
    assert.deepStrictEqual(writtenOf(runId).filter((w) => TERMINAL.has(w.status)), [{ status: "success", receipt: 0 }])
  })
})

describe("a run failing the delivery check, streamed in `events` mode", () => {
  it("ends as a failed run's stream: no end of the graph, then the error", async () => {
    const { events, run } = await streamRun("events-undelivered", "Write it [unpresented-events]", ["events"])
    assert.strictEqual(run.status, "error")
    const names = events.map((e) => e.event === "events" ? `${(e.data as any).event}:${(e.data as any).name}` : e.event)
    assert.notInclude(names, "on_chain_end:LangGraph")
    assert.deepStrictEqual(names.slice(-2), ["error", "end"])
  })
})
