/**
 * DeerFlow's artifact delivery check (its worker's `_delivery_content_with_outputs`, test_run_worker_delivery): a
 * gateway run that created or modified files under `/mnt/user-data/outputs` and presented none of them (the file or
 * a folder holding it) ends as `error`, "Artifact delivery incomplete: ...", its stream ending as a failed run's
 * (`error`, then `end`) and its `run.delivery` receipt carrying the verdict. Runs that present what they made, or
 * change only the workspace, succeed. Runs that wrote outputs without presenting them ended as `success`.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as FC from "effect/FastCheck"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Delivery from "../../../src/programs/gateway/Delivery.js"
import * as Requests from "../../support/requests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const OUT = "/mnt/user-data/outputs"
const receipt = (presented: ReadonlyArray<string>): Delivery.Receipt => ({
  presented: presented.length,
  paths: presented,
  by_tool: presented.length > 0 ? { present_files: presented } : {}
})

const segment = FC.stringMatching(/^[a-z0-9][a-z0-9._-]{0,7}$/)
const outputPath = FC.array(segment, { minLength: 1, maxLength: 4 }).map((parts) => `${OUT}/${parts.join("/")}`)

describe("the delivery verdict", () => {
  it("a presented folder covers the files under it (DeerFlow's directory test)", () => {
    const produced = [`${OUT}/site/index.html`, `${OUT}/site/assets/style.css`]
    const verdict = Delivery.verdict(receipt([`${OUT}/site`]), produced) as Delivery.Verdict
    assert.deepStrictEqual(verdict.matched_paths, produced)
    assert.strictEqual(verdict.satisfied, true)
    assert.strictEqual(verdict.stage, "presented")
    assert.isUndefined(Delivery.failure(verdict))
    // a sibling whose name starts like the folder is not under it
    assert.isFalse(Delivery.covers(`${OUT}/site`, `${OUT}/site2/index.html`))
    assert.isTrue(Delivery.covers(`${OUT}/site/`, `${OUT}/site/index.html`))
    assert.isFalse(Delivery.covers("/", `${OUT}/site/index.html`))
  })

  it.prop("a run that changed no outputs keeps its receipt and never fails", [FC.array(outputPath)], ([shown]) => {
    const given = receipt(shown)
    assert.strictEqual(Delivery.verdict(given, []), given)
    assert.isUndefined(Delivery.failure(Delivery.verdict(given, [])))
  })

  it.prop(
    "a run that changed outputs fails exactly when none of them is covered by a presented path",
    [FC.uniqueArray(outputPath, { minLength: 1, maxLength: 5 }), FC.array(outputPath, { maxLength: 5 })],
    ([produced, shown]) => {
      const verdict = Delivery.verdict(receipt(shown), produced) as Delivery.Verdict
      const covered = produced.filter((p) => shown.some((s) => p === s || p.startsWith(`${s}/`)))
      assert.deepStrictEqual(verdict.matched_paths, covered)
      assert.deepStrictEqual(verdict.produced_paths, produced)
      assert.deepStrictEqual(verdict.presented_paths, shown)
      assert.strictEqual(verdict.satisfied, covered.length > 0)
      const stage = covered.length > 0 ? "presented" : shown.length > 0 ? "mismatched" : "not_started"
      assert.strictEqual(verdict.stage, stage)
      assert.strictEqual(Delivery.failure(verdict), covered.length > 0 ? undefined : Delivery.INCOMPLETE)
      // presenting one of the produced files always delivers
      const one = Delivery.verdict(receipt([...shown, produced[0]!]), produced)
      assert.isUndefined(Delivery.failure(one))
    }
  )

  it("only what present_files presented counts", () => {
    const other = { presented: 1, paths: [`${OUT}/a.md`], by_tool: { other_tool: [`${OUT}/a.md`] } }
    const verdict = Delivery.verdict(other, [`${OUT}/a.md`]) as Delivery.Verdict
    assert.deepStrictEqual([verdict.stage, verdict.satisfied], ["not_started", false])
    assert.strictEqual(Delivery.failure(verdict), Delivery.INCOMPLETE)
  })

  it("lists at most 64,000 characters of paths each, judging on all of them", () => {
    // 2,000 files of long names (what a snapshot may find), the last of them the one presented
    const name = (i: number) => `${OUT}/${"n".repeat(200)}-${String(i).padStart(4, "0")}.md`
    const produced = Array.from({ length: 2000 }, (_, i) => name(i))
    const last = produced.at(-1)!
    const verdict = Delivery.verdict(receipt([last]), produced) as Delivery.Verdict
    const chars = (paths: ReadonlyArray<string>) => paths.reduce((n, path) => n + path.length, 0)
    assert.isAtMost(chars(verdict.produced_paths), Delivery.MAX_LISTED_CHARS)
    assert.isBelow(verdict.produced_paths.length, produced.length)
    assert.isTrue(verdict.satisfied)
    assert.deepStrictEqual(verdict.matched_paths, [last])
    assert.isUndefined(Delivery.failure(verdict))
  })
})

const write = (path: string) => ({ name: "write_file", arguments: { description: "file", path, content: "# Deer\n" } })
const present = (path: string) => ({ name: "present_files", arguments: { filepaths: [path] } })
const toolCount = (body: any) =>
  body.messages.slice(body.messages.findLastIndex((m: any) => m.role === "user")).filter((m: any) => m.role === "tool")
    .length

// each thread's request says what its run does: write a file, then present (or not) something
const PLANS: Record<string, ReadonlyArray<ReadonlyArray<unknown>>> = {
  "keep it to yourself": [[write(`${OUT}/secret-plan.md`)]],
  "deliver it": [[write(`${OUT}/report.md`)], [present(`${OUT}/report.md`)]],
  "show the old one": [[write(`${OUT}/fresh.md`)], [present(`${OUT}/old.md`)]],
  "draft in the workspace": [[write("/mnt/user-data/workspace/draft.md")]],
  "ask me first": [[write(`${OUT}/outline.md`)], [{
    name: "ask_clarification",
    arguments: { question: "Which herd?", clarification_type: "approach_choice", options: ["North", "South"] }
  }]]
}

let gateway: TestGateway
beforeAll(async () => {
  gateway = await Support.start({
    script: (body) => {
      const text = Support.lastUserText(body)
      const plan = Object.entries(PLANS).find(([asked]) => text.includes(asked))?.[1]
      const step = plan?.[toolCount(body)]
      return step === undefined ? "Done." : { toolCalls: step as any }
    }
  })
})
afterAll(() => gateway?.stop())

// (the open gateway's user, `default`: its threads' folders are named by the client's ids)
const user = Requests.as(() => gateway)

// a run of `text` on a new thread, streamed: its SSE event names, its record and its delivery receipt
const streamed = async (thread: string, text: string) => {
  assert.strictEqual((await user("POST", "/api/threads", { thread_id: thread })).status, 200)
  const answer = await user("POST", `/api/threads/${thread}/runs/stream`, {
    input: { messages: [{ type: "human", content: text }] },
    stream_mode: ["values"]
  })
  assert.strictEqual(answer.status, 200, answer.text)
  const sse = answer.text.split("\n\n").flatMap((block) => {
    const name = block.split("\n").find((line) => line.startsWith("event: "))?.slice(7)
    const data = block.split("\n").find((line) => line.startsWith("data: "))?.slice(6)
    return name === undefined ? [] : [{ event: name, data: data === undefined ? null : JSON.parse(data) }]
  })
  const runId = (await user("GET", `/api/threads/${thread}/runs`)).json()[0].run_id as string
  const record = (await user("GET", `/api/threads/${thread}/runs/${runId}`)).json()
  const events = (await user("GET", `/api/threads/${thread}/runs/${runId}/events`)).json() as ReadonlyArray<any>
  return { sse, record, events, delivery: events.at(-1)!.content }
}

describe("a gateway run's delivery check", () => {
  it("a run that wrote an output and presented nothing fails, as a failed run ends", async () => {
    const { sse, record, events, delivery } = await streamed("undelivered", "keep it to yourself")
    assert.deepInclude(record, { status: "error", error: Delivery.INCOMPLETE })
    assert.deepStrictEqual(sse.slice(-2).map((e) => e.event), ["error", "end"])
    assert.deepInclude(sse.at(-2)!.data as any, { message: Delivery.INCOMPLETE, name: Delivery.ERROR_NAME })
    const ended = events.find((e) => e.event_type === "run.error")
    assert.strictEqual(ended.content, Delivery.INCOMPLETE)
    assert.deepInclude(ended.metadata, { status: "error", error_type: Delivery.ERROR_NAME })
    assert.deepStrictEqual(delivery, {
      presented: 0,
      paths: [],
      by_tool: {},
      verification: { source: "outputs_changed", requirement: "present_files_matches_produced_output" },
      produced_paths: [`${OUT}/secret-plan.md`],
      presented_paths: [],
      matched_paths: [],
      stage: "not_started",
      satisfied: false
    })
    // the thread's status is its last run's
    assert.strictEqual((await user("GET", "/api/threads/undelivered")).json().status, "error")
  })

  it("a run that presented the output it wrote succeeds, its receipt saying so", async () => {
    const { sse, record, delivery } = await streamed("delivered", "deliver it")
    assert.strictEqual(record.status, "success")
    assert.notInclude(sse.map((e) => e.event), "error")
    assert.deepInclude(delivery, {
      presented: 1,
      produced_paths: [`${OUT}/report.md`],
      presented_paths: [`${OUT}/report.md`],
      matched_paths: [`${OUT}/report.md`],
      stage: "presented",
      satisfied: true
    })
  })

  it("a run that presented only an older file than the one it wrote fails, mismatched", async () => {
    // the older file is there before the run
    const outputs = Path.join(gateway.home, "users/default/threads/mismatched/user-data/outputs")
    Fs.mkdirSync(outputs, { recursive: true })
    Fs.writeFileSync(Path.join(outputs, "old.md"), "# Old\n")
    const { sse, record, delivery } = await streamed("mismatched", "show the old one")
    assert.deepInclude(record, { status: "error", error: Delivery.INCOMPLETE })
    assert.strictEqual(sse.at(-2)!.event, "error")
    assert.deepInclude(delivery, {
      presented: 1,
      produced_paths: [`${OUT}/fresh.md`],
      presented_paths: [`${OUT}/old.md`],
      matched_paths: [],
      stage: "mismatched",
      satisfied: false
    })
  })

  it("a run that wrote an output, then asked a clarification question, waits for the answer unfailed", async () => {
    const { sse, record, delivery } = await streamed("asked", "ask me first")
    assert.strictEqual(record.status, "success")
    assert.notInclude(JSON.stringify(record), Delivery.INCOMPLETE)
    assert.notInclude(sse.map((e) => e.event), "error")
    // its receipt still says what it produced and did not present
    assert.deepInclude(delivery, { produced_paths: [`${OUT}/outline.md`], stage: "not_started", satisfied: false })
    const stored = await Effect.runPromise(gateway.store.runs({ runId: record.run_id }))
    assert.strictEqual(stored[0]!.status, "interrupted")
  })

  it("a run that wrote only in the workspace succeeds, its receipt as before", async () => {
    const { sse, record, delivery } = await streamed("workspace-only", "draft in the workspace")
    assert.strictEqual(record.status, "success")
    assert.notInclude(sse.map((e) => e.event), "error")
    assert.deepStrictEqual(delivery, { presented: 0, paths: [], by_tool: {} })
    const draft = Path.join(gateway.home, "users/default/threads/workspace-only/user-data/workspace/draft.md")
    assert.isTrue(Fs.existsSync(draft))
  })
})
