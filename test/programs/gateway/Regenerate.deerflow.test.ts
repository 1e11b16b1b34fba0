/**
 * The messages page (`GET /api/threads/{id}/messages/page`, what DeerFlow's app reads when a chat is opened or
 * reloaded) around a regenerate, as DeerFlow's page reads its run journal (test_thread_messages_page: a source run
 * is hidden once a regenerate of it succeeded, `list_successful_regenerate_sources`): while the regenerate runs, and
 * after it failed at the model or was stopped, the original answer shows, with the attempt after it (its question
 * again, under the attempt's run and a seq of its own, and what it answered); once it succeeded, only the new turn.
 * Antler's page, folded from the checkpoints, showed the fork's turn alone from the moment the regenerate started,
 * so a failed regenerate lost the answer the user had.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import type { ChatRequestBody, Turn } from "../../../src/layers/ScriptedChatServer.js"
import { until } from "../../support/poll.js"
import * as Requests from "../../support/requests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const ALICE = "alice-token-regenerate-0000"
const BOB = "bob-token-regenerate-000000"

let gateway: TestGateway
let answers = 0
/** What the model does with the next question ("fail": refuses it, "stall": streams a start, then nothing). */
let next: "answer" | "fail" | "stall" | "clarify" = "answer"

const alice = Requests.as(() => gateway, ALICE)
const bob = Requests.as(() => gateway, BOB)

beforeAll(async () => {
  gateway = await Support.start({
    script: (_body: ChatRequestBody): Turn => {
      const mode = next
      next = "answer"
      if (mode === "fail") {
        return { status: 400, body: { error: { message: "the model refuses this", type: "invalid_request_error" } } }
      }
      if (mode === "stall") return { content: "A second thought about", stall: true }
      if (mode === "clarify") {
        const args = { question: "Which city?", clarification_type: "approach_choice", options: ["Paris", "Rome"] }
        return { toolCalls: [{ name: "ask_clarification", arguments: args }] }
      }
      return `Answer ${++answers}.`
    },
    config: { gateway: { auth: { tokens: [{ token: ALICE, user: "alice" }, { token: BOB, user: "bob" }] } } }
  })
})
afterAll(() => gateway?.stop())

const textOf = (content: any) =>
  typeof content.content === "string" ? content.content : content.content.map((c: any) => c.text ?? "").join("")

/** The page as the app reads it: each row's type, text, run and seq. */
const page = async (threadId: string, as = alice) => {
  const answer = await as("GET", `/api/threads/${threadId}/messages/page`)
  assert.strictEqual(answer.status, 200, answer.text)
  const body = answer.json()
  const seqs = body.data.map((row: any) => row.seq)
  // (the app refuses a page whose seqs repeat, and orders the rows by them)
  assert.isTrue(seqs.every((s: number, i: number) => i === 0 || s > seqs[i - 1]), JSON.stringify(seqs))
  return body.data.map((row: any) => ({
    type: row.content.type as string,
    id: row.content.id as string,
    text: textOf(row.content),
    run: row.run_id as string,
    seq: row.seq as number
  }))
}

/** Each row's type and text (a model's answer as "Answer N." for any N; a failed call's as its first words). */
const shape = (rows: ReadonlyArray<{ type: string; text: string }>) =>
  rows.map((row) => [
    row.type,
    row.text.replace(/^Answer \d+\.$/, "Answer N.").replace(/^(LLM request failed): .*refuses this$/s, "$1")
  ])

/** A thread of two turns; the page's rows. */
const chat = async (threadId: string) => {
  assert.strictEqual((await alice("POST", "/api/threads", { thread_id: threadId })).status, 200)
  for (const question of ["What do deer eat?", "And fawns?"]) {
    const run = await alice("POST", `/api/threads/${threadId}/runs/wait`, {
      input: { messages: [{ type: "human", content: question }] }
    })
    assert.strictEqual(run.status, 200, run.text)
  }
  return page(threadId)
}

/** The app's regenerate of the latest answer: the prepare, then a background run with what it answered. */
const regenerate = async (threadId: string, answerId: string) => {
  const prepared = await alice("POST", `/api/threads/${threadId}/runs/regenerate/prepare`, { message_id: answerId })
  assert.strictEqual(prepared.status, 200, prepared.text)
  const { input, checkpoint, metadata } = prepared.json()
  const run = await alice("POST", `/api/threads/${threadId}/runs`, { input, checkpoint, metadata })
  assert.strictEqual(run.status, 200, run.text)
  return run.json().run_id as string
}

const joined = async (threadId: string, runId: string) => {
  await alice("GET", `/api/threads/${threadId}/runs/${runId}/join`)
  return (await alice("GET", `/api/threads/${threadId}/runs/${runId}`)).json().status as string
}

describe("the messages page around a regenerate (DeerFlow's successful-regenerate filter)", () => {
  it("after a regenerate that succeeded: the new turn only, its question under the new run", async () => {
    const before = await chat("regen-ok")
    const runId = await regenerate("regen-ok", before[3].id)
    assert.strictEqual(await joined("regen-ok", runId), "success")
    const after = await page("regen-ok")
    assert.deepStrictEqual(after.slice(0, 2), before.slice(0, 2))
    assert.deepStrictEqual(shape(after.slice(2)), [["human", "And fawns?"], ["ai", "Answer N."]])
    assert.notStrictEqual(after[3].text, before[3].text)
    // (DeerFlow's journal writes the question again under the regenerate's run, after everything before it)
    assert.deepStrictEqual(after.slice(2).map((row: any) => row.run), [runId, runId])
    assert.strictEqual(after[2].id, before[2].id)
    assert.isAbove(after[2].seq, before[3].seq)
  })

  it("after a regenerate that failed at the model: the original answer, then the attempt", async () => {
    const before = await chat("regen-fails")
    next = "fail"
    const runId = await regenerate("regen-fails", before[3].id)
    assert.strictEqual(await joined("regen-fails", runId), "error")
    const after = await page("regen-fails")
    assert.deepStrictEqual(after.slice(0, 4), before)
    // (the attempt's answer: what the failed call was, as Antler answers a model that fails)
    assert.deepStrictEqual(shape(after.slice(4)), [["human", "And fawns?"], ["ai", "LLM request failed"]])
    assert.deepStrictEqual(after.slice(4).map((row: any) => row.run), [runId, runId])
    assert.strictEqual(after[4].id, before[2].id)
    // the page's older rows are read by before_seq as the others
    const older = (await alice("GET", `/api/threads/regen-fails/messages/page?limit=2&before_seq=${after[4].seq}`))
      .json()
    assert.deepStrictEqual(older.data.map((row: any) => row.seq), [before[2].seq, before[3].seq])
    assert.isTrue(older.has_more)

    // the original answer shown again can be branched from, as any answer of the page (DeerFlow's branch finds
    // it among the thread's checkpoints): the branch holds the conversation up to it
    const branch = await alice("POST", "/api/threads/regen-fails/branches", { message_id: before[3].id })
    assert.strictEqual(branch.status, 200, branch.text)
    const branched = await page(branch.json().thread_id)
    assert.deepStrictEqual(branched.map((row: any) => row.text), before.map((row: any) => row.text))

    // the next question goes on after it; the page keeps all of it, and the other user sees none of it
    const go = await alice("POST", "/api/threads/regen-fails/runs/wait", {
      input: { messages: [{ type: "human", content: "What about elk?" }] }
    })
    assert.strictEqual(go.status, 200, go.text)
    const later = await page("regen-fails")
    assert.deepStrictEqual(later.slice(0, 6), after)
    assert.deepStrictEqual(shape(later.slice(6)), [["human", "What about elk?"], ["ai", "Answer N."]])
    assert.deepStrictEqual(await page("regen-fails", bob), [])
  })

  it("while a regenerate runs, and after it was stopped: the original answer beside the attempt", async () => {
    const before = await chat("regen-stop")
    next = "stall"
    const runId = await regenerate("regen-stop", before[3].id)
    await until(
      async () => (await alice("GET", `/api/threads/regen-stop/runs/${runId}`)).json().status === "running",
      "the regenerate running"
    )
    // (the model asked: the script took the stall)
    await until(() => next === "answer", "the model asked")
    const running = await page("regen-stop")
    assert.deepStrictEqual(running.slice(0, 4), before)
    assert.deepStrictEqual(shape(running.slice(4)), [["human", "And fawns?"]])
    assert.strictEqual(running[4].run, runId)

    const stop = await alice("POST", `/api/threads/regen-stop/runs/${runId}/cancel?action=interrupt`)
    assert.include([200, 202, 204], stop.status, stop.text)
    assert.strictEqual(await joined("regen-stop", runId), "interrupted")
    const stopped = await page("regen-stop")
    assert.deepStrictEqual(stopped.slice(0, 4), before)
    // (a stopped run keeps what it streamed of its answer, see StopPartial.test.ts)
    assert.deepStrictEqual(shape(stopped.slice(4)), [["human", "And fawns?"], ["ai", "A second thought about"]])
    assert.deepStrictEqual(stopped.slice(4).map((row: any) => row.run), [runId, runId])

    // the stopped answer regenerated in turn, with success: it goes, and the original stays (neither DeerFlow's
    // journal nor Antler's page hides a run whose regenerate did not succeed)
    const again = await regenerate("regen-stop", stopped[5].id)
    assert.strictEqual(await joined("regen-stop", again), "success")
    const replaced = await page("regen-stop")
    assert.deepStrictEqual(replaced.slice(0, 4), before)
    assert.deepStrictEqual(shape(replaced.slice(4)), [["human", "And fawns?"], ["ai", "Answer N."]])
    assert.deepStrictEqual(replaced.slice(4).map((row: any) => row.run), [again, again])
  })

  it("a regenerate of a regenerated answer that fails shows the regenerated answer, not the first one", async () => {
    const before = await chat("regen-twice")
    const first = await regenerate("regen-twice", before[3].id)
    assert.strictEqual(await joined("regen-twice", first), "success")
    const regenerated = await page("regen-twice")
    next = "fail"
    const second = await regenerate("regen-twice", regenerated[3].id)
    assert.strictEqual(await joined("regen-twice", second), "error")
    const after = await page("regen-twice")
    assert.deepStrictEqual(after.slice(0, 4), regenerated)
    assert.deepStrictEqual(shape(after.slice(4)), [["human", "And fawns?"], ["ai", "LLM request failed"]])
    assert.deepStrictEqual(after.slice(4).map((row: any) => row.run), [second, second])
  })

  // a turn of two runs: the question, the model's clarification question, and (a run of its own) the user's answer
  // and the model's. DeerFlow hides the run a regenerate replaced, the second; its page keeps the first run's rows
  // (the question, the clarification asked) before the new turn. Antler's hides the whole turn (docs/deerflow.md)
  const clarified = async (threadId: string) => {
    assert.strictEqual((await alice("POST", "/api/threads", { thread_id: threadId })).status, 200)
    next = "clarify"
    const asked = await alice("POST", `/api/threads/${threadId}/runs/wait`, {
      input: { messages: [{ type: "human", content: "Where should deer go?" }] }
    })
    assert.strictEqual(asked.status, 200, asked.text)
    const answered = await alice("POST", `/api/threads/${threadId}/runs/wait`, { command: { resume: "Rome" } })
    assert.strictEqual(answered.status, 200, answered.text)
    const rows = await page(threadId)
    assert.deepStrictEqual(shape([rows[0], rows.at(-1)]), [["human", "Where should deer go?"], ["ai", "Answer N."]])
    assert.isTrue(rows.some((row: any) => row.text.includes("Rome")), JSON.stringify(rows))
    return rows
  }

  it("a regenerate of a clarified turn: the new turn only once it succeeded; the whole turn while it failed", async () => {
    const turn = await clarified("regen-clarified-ok")
    const done = await regenerate("regen-clarified-ok", turn.at(-1).id)
    assert.strictEqual(await joined("regen-clarified-ok", done), "success")
    const replaced = await page("regen-clarified-ok")
    assert.deepStrictEqual(shape(replaced), [["human", "Where should deer go?"], ["ai", "Answer N."]])
    assert.deepStrictEqual(replaced.map((row: any) => row.run), [done, done])

    const before = await clarified("regen-clarified")
    next = "fail"
    const failed = await regenerate("regen-clarified", before.at(-1).id)
    assert.strictEqual(await joined("regen-clarified", failed), "error")
    const after = await page("regen-clarified")
    assert.deepStrictEqual(after.slice(0, before.length), before)
    assert.deepStrictEqual(shape(after.slice(before.length)), [
      ["human", "Where should deer go?"],
      ["ai", "LLM request failed"]
    ])
    // (the failed attempt's answer is the thread's latest: the user regenerates that one, with success; the first
    // turn stays, as DeerFlow's page keeps a run whose regenerate did not succeed)
    const again = await regenerate("regen-clarified", after.at(-1).id)
    assert.strictEqual(await joined("regen-clarified", again), "success")
    const later = await page("regen-clarified")
    assert.deepStrictEqual(later.slice(0, before.length), before)
    assert.deepStrictEqual(shape(later.slice(before.length)), [
      ["human", "Where should deer go?"],
      ["ai", "Answer N."]
    ])
    assert.deepStrictEqual(later.slice(before.length).map((row: any) => row.run), [again, again])
  })
})
