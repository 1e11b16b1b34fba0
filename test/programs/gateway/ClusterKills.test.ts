/**
 * Durable background runs under repeated SIGKILL (issue 30 item 2, "ten times"): two `antler serve` processes
 * (real child processes) are runners of one cluster on one PostgreSQL database. Ten rounds: a batch of background
 * runs on fresh threads, accepted round-robin; each run saves a first step (a file written), then runs a slow bash
 * command that records that it ran and waits for a signal. Once every command is in flight, the process running
 * most of them (the ancestor of their processes) is killed with SIGKILL, a replacement starts at once (as a
 * supervisor restarts it; there are always survivors) and the commands are released. Every run ends `success` on
 * the survivors; its first step is in its thread once; every command ran once; a command whose process died is
 * answered "interrupted" in its thread, paired with its call, the others of runs never resumed with their real output.
 *
 * And the ids of a resumed run's events: a client that followed a run until its runner died and joins again with
 * the `Last-Event-ID` it had sees none again and none going back, from the resumed attempt's first event.
 * Skipped, saying why, without PostgreSQL.
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
if ("skip" in pg) console.warn(`[gateway cluster kills] skipped: ${pg.skip}`)

const ROUNDS = 10
const RUNS_PER_ROUND = 4

const post = (base: string, path: string, body: unknown) =>
  fetch(`${base}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body)
  })

const getJson = async (url: string) => await (await fetch(url)).json() as any

// the slow command (named after its job, so that the test finds the process running it): records that it ran,
// waits for SIGUSR1 (the thread's files are staged into the sandbox: a file the test wrote meanwhile may not be
// seen there), and says so
const slow = (job: string) =>
  `trap "go=1" USR1; echo ${job} >> /mnt/user-data/workspace/ran.txt; ` +
  `while [ -z "$go" ]; do sleep 0.1; done; echo released`

const parentOf = (pid: number) => {
  try {
    const stat = Fs.readFileSync(`/proc/${pid}/stat`, "utf8")
    return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1])
  } catch {
    return 0
  }
}

/** The pids of the slow commands of `job` running now. */
const commandsOf = (job: string): ReadonlyArray<number> => {
  const found: Array<number> = []
  for (const entry of Fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue
    try {
      const argv = Fs.readFileSync(`/proc/${entry}/cmdline`, "utf8").split("\0")
      // (in bwrap, `bash -c` and the command; on the host, the command comes after the limits and a `cd`)
      const marker = `trap "go=1" USR1; echo ${job}`
      if (argv[0] === "/bin/bash" && argv.includes("-c") && argv.some((arg) => arg.includes(marker))) {
        found.push(Number(entry))
      }
    } catch {
      // gone
    }
  }
  return found
}

/** Which of `candidates` runs the slow command of `job` (an ancestor of its process). */
const runnerOf = (job: string, candidates: ReadonlyArray<number>): number | undefined => {
  for (const command of commandsOf(job)) {
    for (let pid = command, depth = 0; pid > 1 && depth < 20; pid = parentOf(pid), depth++) {
      if (candidates.includes(pid)) return pid
    }
  }
  return undefined
}

/** Lets every slow command of `job` go on. */
const release = (job: string) => {
  for (const pid of commandsOf(job)) {
    try {
      process.kill(pid, "SIGUSR1")
    } catch {
      // gone
    }
  }
}

// step 1 a file written; step 2 the slow command; then an answer
const script = (body: ChatRequestBody): Turn => {
  const results = body.messages.filter((m) => m.role === "tool").length
  if (results === 0) {
    return {
      content: "Saving part one.",
      toolCalls: [{
        name: "write_file",
        arguments: { description: "part one", path: "/mnt/user-data/workspace/part1.md", content: "part one\n" }
      }]
    }
  }
  if (results === 1) {
    const asked = JSON.stringify(body.messages.filter((m) => m.role === "user").map((m) => m.content))
    const job = /Job (\d+)\.(\d+)/.exec(asked)
    const command = slow(job === null ? "job" : `job-${job[1]}-${job[2]}`)
    return { toolCalls: [{ name: "bash", arguments: { description: "the slow job", command } }] }
  }
  return "Job done."
}

// (commands orphaned by a killed process end once released)
const suite = Cluster.suite(pg, () => release("job-"))
type Started = Cluster.Runner

const TERMINAL = new Set(["success", "error", "interrupted", "timeout"])

/** A cluster on a fresh database: its runners are started with `start`; they share a data directory. */
const cluster = async () => {
  const dbUrl = await (pg as Postgres.Postgres).createDatabase()
  const scripted = await suite.model(script)
  const home = Support.tempDir("antler-cluster-kills-")
  const start = () =>
    suite.runner({
      dbUrl,
      home,
      modelUrl: scripted.url,
      config: { sandbox: { allow_host_bash: true } },
      cluster: { health_check_seconds: 1 }
    })
  const workspace = (threadId: string) => Path.join(home, "users/default/threads", threadId, "user-data/workspace")
  const ranBy = (threadId: string): ReadonlyArray<string> => {
    const file = Path.join(workspace(threadId), "ran.txt")
    return Fs.existsSync(file) ? Fs.readFileSync(file, "utf8").split("\n").filter((l) => l !== "") : []
  }
  return { dbUrl, scripted, start, workspace, ranBy }
}

/**
 * What a failed check of run `runId` shows, to tell its causes apart: its record and its thread's lease in the
 * database, and what each runner (`servers`, live or killed) logged of it, of its thread, of its shards or of leases.
 */
const evidence = (
  dbUrl: string,
  servers: ReadonlyArray<{ readonly child: { readonly pid?: number | undefined }; readonly output: () => string }>,
  threadId: string,
  runId: string
) => {
  const record = Postgres.psql(dbUrl, `SELECT status, started_at, ended_at, metadata FROM antler_runs ` +
    `WHERE run_id = '${runId}'`)
  const lease = Postgres.psql(dbUrl, `SELECT run_id, owner, expires_at FROM antler_leases WHERE thread_id = ` +
    `'${threadId}'`)
  const relevant = /shard|handed|drain|lapse|lease|resum|runner/i
  const logged = servers.map((s) =>
    `--- runner ${s.child.pid}:\n` + s.output().split("\n")
      .filter((line) => line.includes(runId) || line.includes(threadId) || relevant.test(line))
      .slice(-60).join("\n")
  )
  return [`run ${runId} on ${threadId}: ${record}`, `lease: ${lease}`, ...logged].join("\n")
}

/** Kills `victim` with SIGKILL and waits until it is gone. */
const kill = async (victim: Started) => {
  const exited = new Promise((resolve) => victim.server.child.once("exit", resolve))
  victim.server.child.kill("SIGKILL")
  await exited
}

describe.skipIf("skip" in pg)("a cluster's runners killed ten times mid-tool-call", () => {
  it("every run ends on the survivors; no step lost, no tool run twice, interrupted calls marked", async () => {
    const { dbUrl, ranBy, scripted, start, workspace } = await cluster()
    // (both at once, on a fresh database)
    let live: Array<Started> = await Promise.all([start(), start()])
    let interrupted = 0
    for (let round = 0; round < ROUNDS; round++) {
      // a batch of background runs on fresh threads, accepted round-robin
      const batch: Array<{ readonly threadId: string; readonly runId: string }> = []
      for (let i = 0; i < RUNS_PER_ROUND; i++) {
        const via = live[i % live.length]!
        const thread = await (await post(via.url, "/threads", {})).json() as any
        const response = await post(via.url, `/threads/${thread.thread_id}/runs`, {
          assistant_id: "lead_agent",
          input: { messages: [{ type: "human", content: `Job ${round}.${i}` }] }
        })
        // (a refusal shows each runner's log of shards and leases: a request interrupted with its runner's entity is a
        // 503 without a body)
        assert.strictEqual(response.status, 200, `${await response.clone().text()}\n${
          suite.servers.map((s) => `--- runner ${s.child.pid}:\n${
            s.output().split("\n").filter((line) => /ERROR|shard|lease|handed/i.test(line)).slice(-30).join("\n")
          }`).join("\n")
        }`)
        const run = await response.json() as any
        batch.push({ threadId: thread.thread_id, runId: run.run_id })
      }
      // every slow command in flight: its call saved, and started
      await until(
        async () => batch.every(({ threadId }) => ranBy(threadId).length > 0),
        () => `the commands in flight: ${live.map((s) => s.server.output()).join("\n")}`
      )
      // the process running most of them dies
      const pids = batch.map((_, i) => runnerOf(`job-${round}-${i} `, live.map((s) => s.server.child.pid!)))
      const count = (s: Started) => pids.filter((pid) => pid === s.server.child.pid).length
      const victim = live.reduce((a, b) => (count(b) > count(a) ? b : a))
      assert.isAbove(count(victim), 0, `the commands ran in ${pids.join(", ")}`)
      const killedPid = victim.server.child.pid!
      await kill(victim)
      const survivors = live.filter((s) => s !== victim)
      // a replacement starts at once (as a supervisor restarts a process), while the killed one's runs wait
      const replacement = start()
      batch.forEach((_, i) => release(`job-${round}-${i} `))

      // every run ends, as read from a survivor
      const survivor = survivors[round % survivors.length]!
      const records = new Map<string, any>()
      const pending: Array<string> = []
      await until(async () => {
        for (const { threadId, runId } of batch) {
          if (records.has(runId)) continue
          const record = await getJson(`${survivor.url}/threads/${threadId}/runs/${runId}`)
          if (TERMINAL.has(record.status)) records.set(runId, record)
        }
        return records.size === batch.length
      }, () => `every run ended; these did not: ${pending.join("; ")}\n${
        suite.servers.map((s) => `--- ${s.child.pid}\n${s.output()}`).join("\n")
      }`).catch(async (error) => {
        for (const b of batch.filter((b) => !records.has(b.runId))) {
          const record = await getJson(`${survivor.url}/threads/${b.threadId}/runs/${b.runId}`)
          const state = await getJson(`${survivor.url}/threads/${b.threadId}/state`)
          const types = state.values.messages.map((m: any) => m.type).join(",")
          pending.push(`${b.runId} on ${b.threadId}: ${record.status} [${types}] ran ${ranBy(b.threadId)}`)
        }
        throw new Error(`${pending.join("\n")}\n${error.message}`)
      })

      for (const { threadId, runId } of batch) {
        const record = records.get(runId)
        const i = batch.findIndex((b) => b.runId === runId)
        const shown = () =>
          `round ${round}, job ${i}: its command ran in ${pids[i]}, process ${killedPid} killed\n` +
          evidence(dbUrl, suite.servers, threadId, runId)
        assert.strictEqual(record.status, "success", `${JSON.stringify(record)}\n${shown()}`)
        const state = await getJson(`${survivor.url}/threads/${threadId}/state`)
        const visible = Support.visible(state.values.messages)
        // the first step once, the command's call once, its one result paired with it, the answer
        assert.deepStrictEqual(
          visible.map((m: any) => m.type),
          ["human", "ai", "tool", "ai", "tool", "ai"],
          shown()
        )
        assert.strictEqual(visible[1].tool_calls[0].name, "write_file")
        assert.strictEqual(visible[2].tool_call_id, visible[1].tool_calls[0].id)
        assert.strictEqual(visible[3].tool_calls.length, 1)
        assert.strictEqual(visible[3].tool_calls[0].name, "bash")
        assert.strictEqual(visible[4].tool_call_id, visible[3].tool_calls[0].id)
        assert.strictEqual(visible[5].content, "Job done.")
        assert.strictEqual(Fs.readFileSync(Path.join(workspace(threadId), "part1.md"), "utf8"), "part one\n")
        // the command ran once; interrupted when its process was killed, its real output when its run was never
        // resumed. (A live runner also hands its runs over, to be resumed, when its shard locks' refresh is not
        // answered within its heartbeat, 3 s here: under load, "Shard lock storage is unhealthy" in its log. Such a
        // run's command, killed with its hand-over, is answered "interrupted" too, and runs once all the same.)
        const ran = ranBy(threadId)
        assert.strictEqual(ran.length, 1, `thread ${threadId} ran the command ${ran.length} times\n${shown()}`)
        assert.deepStrictEqual(ran, [`job-${round}-${i}`])
        const resumed = Postgres.psql(dbUrl, `SELECT metadata::jsonb ? 'resumes' FROM antler_runs ` +
          `WHERE run_id = '${runId}'`) === "t"
        if (pids[i] === killedPid) {
          interrupted++
          assert.isTrue(resumed, shown())
          assert.include(visible[4].content, "interrupted", shown())
        } else if (!resumed) {
          assert.include(visible[4].content, "released", shown())
        } else {
          assert.match(visible[4].content, /released|interrupted/, shown())
        }
      }
      live = [...survivors, await replacement]
    }
    assert.isAtLeast(interrupted, ROUNDS)
    // the model was asked for each run's first step once
    const firsts = scripted.requests.filter((r) => r.messages.at(-1)?.role !== "tool")
    assert.strictEqual(firsts.length, ROUNDS * RUNS_PER_ROUND)
  }, 600_000)

  it("a client joining after a failover with the Last-Event-ID it had sees no id again, none going back", async () => {
    const { dbUrl, ranBy, start } = await cluster()
    const [a, b] = await Promise.all([start(), start()])
    const thread = await (await post(a.url, "/threads", {})).json() as any
    const run = await (await post(a.url, `/threads/${thread.thread_id}/runs`, {
      assistant_id: "lead_agent",
      input: { messages: [{ type: "human", content: "Job 99.0" }] },
      stream_mode: ["values", "messages-tuple"]
    })).json() as any
    // a client follows the run until its process dies (or the process it follows it through loses it)
    const seen: Array<Support.SseEvent> = []
    const following = fetch(`${a.url}/threads/${thread.thread_id}/runs/${run.run_id}/stream`).then((response) =>
      Support.readSse(response, (event) => (seen.push(event), false))
    ).catch(() => undefined)
    await until(async () => ranBy(thread.thread_id).length > 0, () => "the command in flight")
    const runner = runnerOf("job-99-0 ", [a.server.child.pid!, b.server.child.pid!])
    const [victim, survivor] = runner === a.server.child.pid ? [a, b] : [b, a]
    // (the events of the first attempt the client has by then, up to the tool call)
    await until(async () => seen.some((e) => JSON.stringify(e.data).includes("job-99-0")), () => "the call streamed")
    await kill(victim)
    const before = seen.filter((e) => e.id !== undefined).map((e) => Number(e.id))
    const last = before.at(-1)!
    release("job-99-0 ")

    await until(async () => {
      const record = await getJson(`${survivor.url}/threads/${thread.thread_id}/runs/${run.run_id}`)
      return TERMINAL.has(record.status)
    }, () => `the run ended: ${survivor.server.output()}`)
    const joined = await fetch(`${survivor.url}/threads/${thread.thread_id}/runs/${run.run_id}/stream`, {
      headers: { "last-event-id": String(last) }
    })
    assert.strictEqual(joined.status, 200)
    const rest = (await Support.readSse(joined)).events.filter((e) => e.event !== "")
    const ids = rest.map((e) => Number(e.id))
    // every id after the last one the client had, in order, none it had
    assert.isTrue(
      ids.every((id, i) => Number.isSafeInteger(id) && id > last && (i === 0 || id > ids[i - 1]!)),
      `after ${last}: ${ids.join(", ")}`
    )
    assert.isTrue(ids.every((id) => !before.includes(id)))
    // the resumed attempt from its start: its metadata, the call answered interrupted, the answer, the end
    assert.deepStrictEqual(rest[0]!.event, "metadata")
    assert.deepStrictEqual((rest[0]!.data as any).run_id, run.run_id)
    assert.strictEqual(
      (rest[0]!.data as any).attempt,
      2,
      `${rest.map((e) => e.event).join(", ")}\n${evidence(dbUrl, suite.servers, thread.thread_id, run.run_id)}`
    )
    const values = rest.filter((e) => e.event === "values").at(-1)!.data as any
    const visible = Support.visible(values.messages)
    assert.deepStrictEqual(visible.map((m: any) => m.type), ["human", "ai", "tool", "ai", "tool", "ai"])
    assert.include(visible[4].content, "interrupted")
    assert.strictEqual(visible[5].content, "Job done.")
    assert.strictEqual(rest.at(-1)!.event, "end")
    await following
  }, 240_000)
})
