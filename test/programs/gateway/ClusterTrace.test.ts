/**
 * Request trace ids and W3C Trace Context across a cluster (`gateway.cluster`): two `antler serve` processes (real
 * child processes) are runners of one cluster on one PostgreSQL database, with `logging.enhance` (JSON lines) and
 * traces exported to a loopback OTLP/HTTP receiver. Runs are accepted by one process and executed by the thread's
 * owner, which may be the other: the run's log lines there name the `X-Trace-Id` of the request that started it,
 * and its `antler.run` span, exported by that runner, holds it and is a child of the client's span its
 * `traceparent` named, as the model requests that runner sends say. Skipped, saying why, without PostgreSQL.
 */
import { afterAll, assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Scope from "effect/Scope"
import * as Path from "node:path"
import * as ScriptedChatServer from "../../../src/layers/ScriptedChatServer.js"
import type { ChatRequestBody, Turn } from "../../../src/layers/ScriptedChatServer.js"
import { serveProcess, type ServeProcess, writeServeConfig } from "../../support/cli.js"
import * as Otlp from "../../support/otlp.js"
import { eventually, until } from "../../support/poll.js"
import { freePort } from "../../support/ports.js"
import * as Postgres from "../../support/postgres.js"
import * as Support from "./support.js"

const pg = await Postgres.start()
if ("skip" in pg) console.warn(`[gateway cluster traces] skipped: ${pg.skip}`)

/**
 * Each question's first model call fails with a 503 (the runner logs its retry), the second answers. "Resume me":
 * a first step (a file written), then the model hangs once (its runner is killed meanwhile), fails once with a 503
 * on the runner that resumed the run, and answers.
 */
const failed = new Set<string>()
let afterStep = 0
const script = (body: ChatRequestBody): Turn => {
  const asked = Support.lastUserText(body)
  if (asked.includes("Resume me")) {
    if (body.messages.at(-1)?.role !== "tool") {
      return {
        toolCalls: [{
          name: "write_file",
          arguments: { description: "d", path: "/mnt/user-data/workspace/a.md", content: "a" }
        }]
      }
    }
    const call = afterStep++
    return call === 0 ? { content: "Still thinking", stall: true } : call === 1 ? { status: 503 } : "Resumed and done."
  }
  if (!failed.has(asked)) {
    failed.add(asked)
    return { status: 503 }
  }
  return "Done."
}

const scope = Effect.runSync(Scope.make())
const servers: Array<ServeProcess> = []
let receiver: Otlp.Receiver | undefined
afterAll(async () => {
  for (const server of servers) server.child.kill("SIGKILL")
  await Effect.runPromise(Scope.close(scope, Exit.void))
  await receiver?.close()
  if ("stop" in pg) await pg.stop()
})

/** The JSON log lines a process wrote (`logging.enhance.format: json`). */
const logLines = (server: ServeProcess): ReadonlyArray<{ readonly trace_id: string; readonly message: string }> =>
  server.output().split("\n").flatMap((line) => {
    if (!line.startsWith("{")) return []
    try {
      const parsed = JSON.parse(line)
      return typeof parsed.message === "string" ? [parsed] : []
    } catch {
      return []
    }
  })

const post = (base: string, path: string, body: unknown, headers: Record<string, string> = {}) =>
  fetch(`${base}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify(body)
  })

const hex = (n: number, length: number) => n.toString(16).padStart(length, "0")

interface Runner {
  readonly name: string
  readonly server: ServeProcess
  readonly url: string
}

/**
 * Two runners (`runner-a`, `runner-b`, their traces' service names) of one cluster on a fresh database, sharing a
 * data directory, the scripted model and the OTLP receiver; once both are registered.
 */
const cluster = async () => {
  const dbUrl = await (pg as Postgres.Postgres).createDatabase()
  const scripted = await Effect.runPromise(Scope.extend(ScriptedChatServer.start(script), scope))
  receiver ??= await Otlp.start()
  const otlp = receiver
  const home = Support.tempDir("antler-cluster-trace-")
  const start = async (name: string): Promise<Runner> => {
    const config = writeServeConfig(Path.join(home, `config-${name}.yaml`), scripted.url, {
      llm_call: { retry_base_delay_ms: 5, retry_cap_delay_ms: 10, burst_retry_base_delay_ms: 5 },
      title: { enabled: false },
      database: { url: dbUrl },
      logging: { enhance: { enabled: true, format: "json" } },
      tracing: { enabled: true, otlp_endpoint: `${otlp.url}/v1/traces`, service_name: name },
      gateway: { cluster: { runner_port: await freePort(), health_check_seconds: 1 } }
    })
    const server = serveProcess(home, config)
    servers.push(server)
    return { name, server, url: await server.url }
  }
  const [a, b] = await Promise.all([start("runner-a"), start("runner-b")])
  await until(
    () => Postgres.psql(dbUrl, "SELECT count(*) FROM cluster_runners WHERE healthy") === "2",
    "both runners registered",
    1200,
    100
  )
  return { a, b, dbUrl, otlp, scripted }
}

describe.skipIf("skip" in pg)("a cluster's runs carry the request's trace", () => {
  it("the runner executing a run logs with its X-Trace-Id and exports its span in the client's trace", async () => {
    const { a, b, otlp, scripted } = await cluster()

    // runs on fresh threads, all accepted by A, until one was executed by B (a thread's owner is its shard's; the
    // shards are spread over a few assignment rounds once both runners registered: a second apart, up to a minute)
    interface Ran {
      readonly by: string
      readonly traceId: string
      readonly otel: string
      readonly client: string
    }
    const ran: Array<Ran> = []
    for (let i = 1; i <= 60 && !ran.some((r) => r.by === "runner-b"); i++) {
      if (i > 1) await new Promise((resolve) => setTimeout(resolve, 1000))
      const thread = await (await post(a.url, "/threads", {})).json() as any
      const traceId = `cluster-trace-${i}`
      const otel = `4bf92f3577b34da6a3ce929d${hex(i, 8)}`
      const client = `00f067aa${hex(i, 8)}`
      const response = await post(a.url, `/threads/${thread.thread_id}/runs/wait`, {
        assistant_id: "lead_agent",
        input: Support.userInput(`question ${i} of the test`)
      }, { "x-trace-id": traceId, traceparent: `00-${otel}-${client}-01` })
      assert.strictEqual(response.status, 200, await response.clone().text())
      assert.strictEqual(response.headers.get("x-trace-id"), traceId)
      // the runner that executed it logged the failed model call's retry, naming the request's trace id
      const by = await eventually(() => {
        for (const runner of [a, b]) {
          const retry = logLines(runner.server).filter((line) =>
            line.message.includes("model call failed, retrying") && line.trace_id === traceId
          )
          if (retry.length > 0) return runner.name
        }
        return undefined
      }, () => `a runner logged the retry of ${traceId}:\n${a.server.output()}\n${b.server.output()}`)
      ran.push({ by, traceId, otel, client })
    }
    assert.isTrue(ran.some((r) => r.by === "runner-b"), `no run of ${ran.length} was executed by B`)

    for (const run of ran) {
      // its span, exported by the runner that executed it: the request's trace id, under the client's span
      const root = await eventually(
        () => otlp.spans().find((s) => s.name === "antler.run" && s.attributes["antler.trace_id"] === run.traceId),
        () => `the span of ${run.traceId} exported: ${JSON.stringify(otlp.spans().map((s) => s.name))}`,
        { tries: 600, everyMs: 100 }
      )
      assert.strictEqual(root.service, run.by)
      assert.strictEqual(root.traceId, run.otel)
      assert.strictEqual(root.parentSpanId, run.client)
      // the model requests of that run went on in the client's trace
      const question = `question ${run.traceId.split("-").at(-1)} of the test`
      const calls = scripted.requests.flatMap((body, i) =>
        Support.lastUserText(body).includes(question) ? [scripted.headers[i]!] : []
      )
      assert.lengthOf(calls, 2)
      for (const headers of calls) {
        assert.match(headers.traceparent ?? "", new RegExp(`^00-${run.otel}-[0-9a-f]{16}-01$`))
      }
    }
    // (on A, the process that accepted them, no log line of a run B executed)
    const ofB = new Set(ran.filter((r) => r.by === "runner-b").map((r) => r.traceId))
    assert.isFalse(logLines(a.server).some((line) => ofB.has(line.trace_id) && line.message.includes("retrying")))
  }, 300_000)

  it("a run resumed by another runner after its own died keeps its X-Trace-Id and the client's span", async () => {
    const { a, b, dbUrl, otlp } = await cluster()
    const thread = await (await post(a.url, "/threads", {})).json() as any
    const otel = "5bf92f3577b34da6a3ce929d0e0e4736"
    const client = "10f067aa0ba902b7"
    const response = await post(a.url, `/threads/${thread.thread_id}/runs`, {
      assistant_id: "lead_agent",
      input: Support.userInput("Resume me")
    }, { "x-trace-id": "resumed-trace", traceparent: `00-${otel}-${client}-01` })
    assert.strictEqual(response.status, 200, await response.clone().text())
    const run = await response.json() as any
    // the first step saved, and the model being asked for the next
    await until(async () => {
      const state = await (await fetch(`${a.url}/threads/${thread.thread_id}/state`)).json() as any
      return state.values.messages.some((m: any) => m.type === "tool") && afterStep > 0
    }, "the first step saved")
    // the runner holding the thread's lease (`host:pid`) dies
    const owner = Postgres.psql(dbUrl, `SELECT owner FROM antler_leases WHERE thread_id = '${thread.thread_id}'`)
    const pid = Number(owner.slice(owner.lastIndexOf(":") + 1))
    const victim = [a, b].find((r) => r.server.child.pid === pid)
    assert.isDefined(victim, `lease owner ${owner}`)
    const survivor = victim === a ? b : a
    const exited = new Promise((resolve) => victim!.server.child.once("exit", resolve))
    victim!.server.child.kill("SIGKILL")
    await exited
    await until(async () => {
      const record = await (await fetch(`${survivor.url}/threads/${thread.thread_id}/runs/${run.run_id}`)).json()
      return (record as any).status === "success"
    }, () => `the run ended on the survivor: ${survivor.server.output()}`, 2400, 100)
    // what the survivor logged of it names the request's trace id: resuming it, and its model call's retry
    const lines = logLines(survivor.server)
    // (once, unless the thread's shard also moved meanwhile)
    const resumed = lines.filter((line) => line.message.includes(`run ${run.run_id}: resumed here`))
    assert.isAtLeast(resumed.length, 1, survivor.server.output())
    assert.deepStrictEqual([...new Set(resumed.map((line) => line.trace_id))], ["resumed-trace"])
    const retry = lines.filter((line) => line.message.includes("model call failed, retrying"))
    assert.isAtLeast(retry.length, 1, survivor.server.output())
    assert.deepStrictEqual([...new Set(retry.map((line) => line.trace_id))], ["resumed-trace"])
    // its span, exported by the survivor: the request's trace id, under the client's span
    const root = await eventually(
      () => otlp.spans().find((s) => s.name === "antler.run" && s.attributes["antler.run_id"] === run.run_id),
      () => `the span of the resumed run exported: ${JSON.stringify(otlp.spans().map((s) => s.name))}`,
      { tries: 600, everyMs: 100 }
    )
    assert.strictEqual(root.service, survivor.name)
    assert.strictEqual(root.attributes["antler.trace_id"], "resumed-trace")
    assert.strictEqual(root.traceId, otel)
    assert.strictEqual(root.parentSpanId, client)
  }, 240_000)
})
