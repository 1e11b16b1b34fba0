/**
 * Runners come and go (issue 30 item 4): `antler serve` processes (real child processes) as runners of one cluster
 * on one PostgreSQL database, each with a Chat Completions server of its own (so a test sees which process asked
 * the model).
 *
 * - SIGTERM drains: the runner of several background runs in flight is stopped with SIGTERM. Runs that end within
 *   `gateway.cluster.drain_seconds` end there; the others (a tool that sleeps on, a model that does not answer) are
 *   stopped at their last completed step and handed over: the survivor resumes them under their ids. Every run
 *   ends `success`, no completed step is lost, no tool runs twice, and the stopped process exits 0. A run queued
 *   (`multitask_strategy: "enqueue"`) behind one that is handed over goes with it and runs after it, once.
 * - A runner joins: with two processes running, a third one takes over shards (new threads' runs ask its model),
 *   and the runs already running on the first two end normally.
 *
 * Skipped, saying why, without PostgreSQL.
 */
import { assert, describe, it } from "@effect/vitest"
import type * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import type * as ScriptedChatServer from "../../../src/layers/ScriptedChatServer.js"
import type { ChatRequestBody, Turn } from "../../../src/layers/ScriptedChatServer.js"
import * as Cluster from "../../support/cluster.js"
import { until } from "../../support/poll.js"
import * as Postgres from "../../support/postgres.js"
import { psql } from "../../support/postgres.js"
import * as Support from "./support.js"

const pg = await Postgres.start()
if ("skip" in pg) console.warn(`[gateway cluster drain] skipped: ${pg.skip}`)

interface Server {
  readonly name: string
  readonly url: string
  readonly child: ChildProcess.ChildProcess
  readonly scripted: ScriptedChatServer.ScriptedChatServer
  readonly output: () => string
  /** The exit code (or signal), once the process exited. */
  readonly exited: Promise<number | string>
}

/** The label a test gave a run (its human message), as the model sees it. */
const labelOf = (body: ChatRequestBody): string => {
  const asked = JSON.stringify(body.messages.filter((m) => m.role === "user").at(-1)?.content ?? "")
  return /\b(short|slowtool|slowmodel|joined|early|idle|idlenext|queued)-\d+/.exec(asked)?.[0] ?? ""
}

const WORKSPACE = "/mnt/user-data/workspace"

/**
 * The model of the process named `name`. Step 1 is a bash call that appends to `ran.txt` (once per execution);
 * what it does then depends on the run: `short` waits for the test's `go` file, `slowtool` sleeps on (on the
 * process `slow`), `slowmodel` returns at once but the next model call hangs (on the process `slow`). Step 2
 * says which process answered.
 */
const scriptOf = (name: string, slow: string) => (body: ChatRequestBody): Turn => {
  const label = labelOf(body)
  const kind = label.split("-")[0]
  if (body.messages.at(-1)?.role === "tool") {
    if (kind === "slowmodel" && name === slow) return { content: "Still thinking", stall: true }
    return `${label} answered by ${name}`
  }
  // a run queued behind another on its thread: a quick step of its own (its own file)
  if (kind === "queued") {
    return {
      toolCalls: [{
        name: "bash",
        arguments: { description: `step one of ${label}`, command: `echo queued >> ${WORKSPACE}/queued.txt; echo step one done` }
      }]
    }
  }
  const wait = kind === "short" || kind === "early"
    // (the test's file is listed in the sandbox, not readable there)
    ? `until ls ${WORKSPACE} | grep -qx go; do sleep 0.1; done`
    : kind === "slowtool" && name === slow
    ? "sleep 600"
    : "true"
  return {
    toolCalls: [{
      name: "bash",
      arguments: {
        description: `step one of ${label}`,
        command: `echo ran >> ${WORKSPACE}/ran.txt; ${wait}; echo step one done`
      }
    }]
  }
}

const suite = Cluster.suite(pg)

/** One more runner of the cluster on `dbUrl`, its data in `home`, with a model of its own. */
const serve = async (name: string, dbUrl: string, home: string, slow: string, drain = 8): Promise<Server> => {
  const scripted = await suite.model(scriptOf(name, slow))
  const { server: started, url } = await suite.runner({
    dbUrl,
    home,
    modelUrl: scripted.url,
    name: `config-${name}.yaml`,
    config: { sandbox: { allow_host_bash: true } },
    gateway: { finished_runs_kept: 1000 },
    cluster: { health_check_seconds: 2, drain_seconds: drain }
  })
  return { name, url, child: started.child, scripted, output: started.output, exited: started.exited }
}

const post = async (base: string, path: string, body: unknown) => {
  const response = await fetch(`${base}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body)
  })
  const json = await response.json() as any
  if (response.status !== 200) throw new Error(`POST ${path}: ${response.status} ${JSON.stringify(json)}`)
  return json
}

const runStatus = async (base: string, thread: string, runId: string): Promise<string> =>
  ((await (await fetch(`${base}/threads/${thread}/runs/${runId}`)).json()) as any).status

interface Started {
  readonly label: string
  readonly kind: string
  readonly thread: string
  readonly runId: string
  readonly workspace: string
}

const startRun = async (base: string, home: string, label: string): Promise<Started> => {
  const thread = (await post(base, "/threads", {})).thread_id as string
  const run = await post(base, `/threads/${thread}/runs`, {
    assistant_id: "lead_agent",
    input: { messages: [{ type: "human", content: `Please do ${label}` }] }
  })
  const workspace = Path.join(home, "users/default/threads", thread, "user-data/workspace")
  return { label, kind: label.split("-")[0]!, thread, runId: run.run_id, workspace }
}

/**
 * A run's stream joined through `base` (from `lastEventId`), read to its end or until the connection is cut (a
 * remote run handed over): its text, what came before a cut included (`Support.readSse` throws it away).
 */
const readStream = async (base: string, run: Started, lastEventId?: string, query = "") => {
  const response = await fetch(
    `${base}/threads/${run.thread}/runs/${run.runId}/stream${query}`,
    lastEventId === undefined ? {} : { headers: { "last-event-id": lastEventId } }
  )
  let text = ""
  let cut = false
  const decoder = new TextDecoder()
  try {
    for await (const chunk of response.body!) text += decoder.decode(chunk as Uint8Array, { stream: true })
  } catch {
    cut = true
  }
  return { status: response.status, text, cut }
}

const ranCount = (run: Started) => {
  const file = Path.join(run.workspace, "ran.txt")
  return Fs.existsSync(file) ? Fs.readFileSync(file, "utf8").split("\n").filter((l) => l === "ran").length : 0
}

/** The step-2 (after the tool) model requests of a run a server got. */
const step2Asks = (server: Server, label: string) =>
  server.scripted.requests.filter((r) => labelOf(r) === label && r.messages.at(-1)?.role === "tool").length
const step1Asks = (server: Server, label: string) =>
  server.scripted.requests.filter((r) => labelOf(r) === label && r.messages.at(-1)?.role !== "tool").length

describe.skipIf("skip" in pg)("a cluster's runners coming and going", () => {
  it("SIGTERM: the runner's runs end within drain_seconds or move; all succeed, none runs twice, exit 0", async () => {
    const dbUrl = await (pg as Postgres.Postgres).createDatabase()
    const home = Support.tempDir("antler-cluster-drain-")
    const a = await serve("A", dbUrl, home, "A", 15)
    const b = await serve("B", dbUrl, home, "A", 15)
    await Cluster.registered(dbUrl, 2)

    // a thread of A's with no run going on
    let idle: Started | undefined
    for (let i = 0; i < 30 && idle === undefined; i++) {
      const run = await startRun(b.url, home, `idle-${i}`)
      await until(async () => (await runStatus(b.url, run.thread, run.runId)) === "success", `run ${run.label}`)
      if (step1Asks(a, run.label) === 1) idle = run
    }
    assert.isDefined(idle, "a thread run by A")

    // background runs, a round of each kind A (the process to stop) does not run yet, until it runs one of each
    // (a thread's runner is its shard's: the shards need not be split evenly, so as many rounds as that takes)
    const runs: Array<Started> = []
    const onA = new Map<string, Array<Started>>()
    const aPid = a.child.pid!
    for (let round = 0; round < 30 && onA.size < 3; round++) {
      const started = await Promise.all(
        ["short", "slowtool", "slowmodel"].filter((kind) => !onA.has(kind)).map((kind) =>
          startRun(round % 2 === 0 ? a.url : b.url, home, `${kind}-${round}`)
        )
      )
      runs.push(...started)
      for (const run of started) {
        // in flight: the tool ran (or, for slowmodel on A, the model is asked for step 2), or it ended elsewhere
        let holder: number | undefined
        await until(async () => {
          holder = Cluster.lease(dbUrl, run.thread)?.pid
          if (holder === undefined) return (await runStatus(b.url, run.thread, run.runId)) === "success"
          if (holder !== aPid) return true
          return run.kind === "slowmodel" ? step2Asks(a, run.label) === 1 : ranCount(run) === 1
        }, `run ${run.label} in flight`)
        if (holder === aPid) onA.set(run.kind, [...(onA.get(run.kind) ?? []), run])
      }
    }
    assert.strictEqual(onA.size, 3, "A runs one run of each kind")
    const draining = [...onA.values()].flat()
    // a run queued behind a slow tool's run of A's (asked through B)
    const ahead = onA.get("slowtool")![0]!
    const queued = await post(b.url, `/threads/${ahead.thread}/runs`, {
      assistant_id: "lead_agent",
      multitask_strategy: "enqueue",
      input: { messages: [{ type: "human", content: "Please do queued-0" }] }
    })
    assert.isString(queued.run_id, JSON.stringify(queued))
    assert.strictEqual(await runStatus(b.url, ahead.thread, queued.run_id), "pending")

    // clients waiting, through B, for the end of the runs A will hand over
    const joins = draining.filter((run) => run.kind !== "short").map((run) => ({
      run,
      values: fetch(`${b.url}/threads/${run.thread}/runs/${run.runId}/join`).then((r) => r.json() as Promise<any>)
    }))
    // a client following, through B, the stream of a run A will hand over, which asked for the run to be cancelled
    // if it goes away
    const followed = onA.get("slowmodel")![0]!
    const following = readStream(b.url, followed, undefined, "?cancel_on_disconnect=true")
    await new Promise((resolve) => setTimeout(resolve, 1000))
    a.child.kill("SIGTERM")
    // another client joins the stream of a run A hands over, through B, as soon as A says it handed it over: before
    // B has resumed it
    const rejoined = until(() => /handed over/.test(a.output()), "a run handed over", 2400, 20).then(() =>
      readStream(b.url, onA.get("slowtool")![0]!, "1")
    )
    // A stops taking work at once: it leaves the runners' registry while its runs are still going on (the short
    // runs' tools are released only now, and return within the drain period however slow the machine is)
    await until(() => psql(dbUrl, "SELECT count(*) FROM cluster_runners") === "1", "A unregistered")
    for (const run of runs) if (run.kind === "short") Fs.writeFileSync(Path.join(run.workspace, "go"), "")
    // the idle thread's shard moves to B, whose model answers its next run
    const next = await post(b.url, `/threads/${idle!.thread}/runs`, {
      assistant_id: "lead_agent",
      input: { messages: [{ type: "human", content: "Please do idlenext-0" }] }
    })
    await until(async () => (await runStatus(b.url, idle!.thread, next.run_id)) === "success", "idlenext-0 ended")
    assert.strictEqual(step1Asks(b, "idlenext-0"), 1)
    assert.strictEqual(step1Asks(a, "idlenext-0"), 0)
    const code = await Promise.race([
      a.exited,
      new Promise((resolve) => setTimeout(() => resolve("still running after 90 s"), 90_000))
    ])
    assert.strictEqual(code, 0, a.output())
    assert.include(a.output(), "handed over to the thread's next runner")

    for (const run of runs) {
      await until(async () => {
        const status = await runStatus(b.url, run.thread, run.runId)
        return status !== "running" && status !== "pending"
      }, `run ${run.label} ended: ${b.output()}`)
    }
    for (const run of runs) {
      const record = (await (await fetch(`${b.url}/threads/${run.thread}/runs/${run.runId}`)).json()) as any
      assert.strictEqual(record.status, "success", `${run.label}: ${JSON.stringify(record)}`)
      const state = (await (await fetch(`${b.url}/threads/${run.thread}/state`)).json()) as any
      // (the queued run's turn follows the one of the run ahead of it)
      const visible = Support.visible(state.values.messages).slice(0, 4)
      // one step each: the tool call and its result kept once, then the answer; nothing of a stopped answer
      assert.deepStrictEqual(visible.map((m: any) => m.type), ["human", "ai", "tool", "ai"], run.label)
      assert.strictEqual(visible[2].tool_call_id, visible[1].tool_calls[0].id, run.label)
      // the tool ran once, and the model was asked for step 1 once in all
      assert.strictEqual(ranCount(run), 1, run.label)
      assert.strictEqual(step1Asks(a, run.label) + step1Asks(b, run.label), 1, run.label)
    }
    // the queued run went with the run ahead of it, and ran after it on B, once
    await until(async () => {
      const status = await runStatus(b.url, ahead.thread, queued.run_id)
      return status !== "running" && status !== "pending"
    }, `the queued run ended: ${b.output()}`)
    assert.strictEqual(await runStatus(b.url, ahead.thread, queued.run_id), "success", b.output())
    const after = (await (await fetch(`${b.url}/threads/${ahead.thread}/state`)).json()) as any
    const turns = Support.visible(after.values.messages)
    assert.deepStrictEqual(turns.map((m: any) => m.type), ["human", "ai", "tool", "ai", "human", "ai", "tool", "ai"])
    assert.strictEqual(turns[7].content, "queued-0 answered by B")
    assert.strictEqual(Fs.readFileSync(Path.join(ahead.workspace, "queued.txt"), "utf8"), "queued\n")
    // the waiting clients got the runs' ends, on B
    for (const join of joins) {
      const values = await join.values
      const seen = Support.visible(values.messages ?? [])
      assert.strictEqual(
        seen.at(-1)?.content,
        `${join.run.label} answered by B`,
        `the join of ${join.run.label} answered ${JSON.stringify(values).slice(0, 2000)}\nB: ${b.output().slice(-4000)}`
      )
    }
    // both streams went on to the resumed runs' ends: the one followed through the change of runner (never cut,
    // no `gap`), the one joined between the two runners once B resumed its run
    for (const [stream, label] of [[await following, followed.label], [await rejoined, onA.get("slowtool")![0]!.label]] as const) {
      assert.strictEqual(stream.status, 200, stream.text)
      assert.isFalse(stream.cut, `${label}: cut after ${stream.text.slice(-2000)}`)
      assert.notInclude(stream.text, "event: gap", stream.text.slice(-2000))
      assert.include(stream.text, `${label} answered by B`, stream.text.slice(-2000))
      assert.match(stream.text, /event: end\n/, stream.text.slice(-2000))
    }
    for (const run of draining) {
      const state = (await (await fetch(`${b.url}/threads/${run.thread}/state`)).json()) as any
      const visible = Support.visible(state.values.messages)
      if (run.kind === "short") {
        // ended on A within the drain period (its tool released after A had left the registry)
        assert.include(visible[2].content, "step one done", run.label)
        assert.strictEqual(visible[3].content, `${run.label} answered by A`)
      } else if (run.kind === "slowtool") {
        // handed over mid-tool: the call is answered interrupted on B, never run again
        assert.include(visible[2].content, "interrupted", run.label)
        assert.strictEqual(visible[3].content, `${run.label} answered by B`)
      } else {
        // handed over while the model was asked: B asks again, from the completed step
        assert.include(visible[2].content, "step one done", run.label)
        assert.strictEqual(visible[3].content, `${run.label} answered by B`)
        assert.strictEqual(step2Asks(b, run.label), 1, run.label)
      }
    }
  }, 300_000)

  it("a runner joins: it takes over shards and their runs; new threads' runs run on it; all end normally", async () => {
    const dbUrl = await (pg as Postgres.Postgres).createDatabase()
    const home = Support.tempDir("antler-cluster-join-")
    const a = await serve("A", dbUrl, home, "none", 10)
    const b = await serve("B", dbUrl, home, "none", 10)
    await Cluster.registered(dbUrl, 2)

    // runs in flight on A and B (their tools wait for the test's go file)
    const early = await Promise.all(
      Array.from({ length: 16 }, (_, i) => startRun(i % 2 === 0 ? a.url : b.url, home, `early-${i}`))
    )
    for (const run of early) await until(() => ranCount(run) === 1, `run ${run.label} in flight`)

    // a third process joins: the shards are spread over three runners again. The runs of the threads whose shards
    // move to C are handed over to it after drain_seconds (10); the others go on where they are
    const c = await serve("C", dbUrl, home, "none", 10)
    await Cluster.registered(dbUrl, 3)
    await until(() => /handed over/.test(a.output() + b.output()), "a run handed over to C", 1200)
    await new Promise((resolve) => setTimeout(resolve, 10_000))
    for (const run of early) Fs.writeFileSync(Path.join(run.workspace, "go"), "")
    const ended = async (run: Started) => {
      await until(async () => {
        const status = await runStatus(a.url, run.thread, run.runId)
        return status !== "running" && status !== "pending"
      }, `run ${run.label} ended: ${a.output()}\n${b.output()}\n${c.output()}`)
      return ((await (await fetch(`${b.url}/threads/${run.thread}/runs/${run.runId}`)).json()) as any).status
    }

    // the runs that were going on end normally: where they ran (their tool returned), or, their thread's shard given
    // to another runner (to C, or, as the shards are spread again, between A and B), on the new owner (the tool
    // call answered interrupted, never run again); every step once
    const movedToC: Array<string> = []
    const stayed: Array<string> = []
    for (const run of early) {
      assert.strictEqual(await ended(run), "success", run.label)
      const state = (await (await fetch(`${c.url}/threads/${run.thread}/state`)).json()) as any
      const visible = Support.visible(state.values.messages)
      assert.deepStrictEqual(visible.map((m: any) => m.type), ["human", "ai", "tool", "ai"], run.label)
      assert.strictEqual(ranCount(run), 1, run.label)
      assert.strictEqual(step1Asks(a, run.label) + step1Asks(b, run.label), 1, run.label)
      const ranOn = step1Asks(a, run.label) === 1 ? "A" : "B"
      const endedOn = (visible[3].content as string).slice(-1)
      assert.strictEqual(visible[3].content, `${run.label} answered by ${endedOn}`)
      if (endedOn === ranOn) {
        assert.include(visible[2].content, "step one done", run.label)
        stayed.push(run.label)
      } else {
        assert.include(visible[2].content, "interrupted", run.label)
        if (endedOn === "C") movedToC.push(run.label)
      }
    }
    assert.isAbove(movedToC.length, 0, "runs of threads whose shards moved to C went on there")
    assert.isAbove(stayed.length, 0, "runs of threads whose shards stayed ended where they ran")

    // new threads' runs: some run on C (its model answers them), whichever process accepted them
    const joined = await Promise.all(
      Array.from({ length: 20 }, (_, i) => startRun([a, b, c][i % 3]!.url, home, `joined-${i}`))
    )
    const answeredBy: Array<string> = []
    for (const run of joined) {
      assert.strictEqual(await ended(run), "success", run.label)
      const state = (await (await fetch(`${a.url}/threads/${run.thread}/state`)).json()) as any
      answeredBy.push((Support.visible(state.values.messages).at(-1).content as string).slice(-1))
    }
    assert.include(answeredBy, "C", JSON.stringify(answeredBy))
  }, 300_000)
})
