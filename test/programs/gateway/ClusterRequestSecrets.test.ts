/**
 * A run's request secrets in a cluster (`gateway.cluster` with `secret`): sealed with the runners' shared secret
 * (`SealedSecrets`) before they travel to the thread's runner or wait in PostgreSQL. Two gateways on one database:
 * runs given `context.secrets` through either, on threads owned by either runner, reach the skill's `bash` command
 * (its reverse comes back), and no table of the database, nor anything the user reads, holds a value. A cluster
 * without `secret` still refuses them with 422. A run whose runner is killed (two `antler serve` processes) is resumed
 * by the thread's next runner with its secrets, opened there from the run's durable message. The seal alone: it
 * opens only under the same secret, for the same user and thread, unchanged. Skipped, saying why, without PostgreSQL.
 */
import * as PgClient from "@effect/sql-pg/PgClient"
import * as SqlClient from "@effect/sql/SqlClient"
import { afterAll, assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as Redacted from "effect/Redacted"
import * as Scope from "effect/Scope"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as ScriptedChatServer from "../../../src/layers/ScriptedChatServer.js"
import type { ChatRequestBody, Turn } from "../../../src/layers/ScriptedChatServer.js"
import * as SealedSecrets from "../../../src/programs/gateway/cluster/SealedSecrets.js"
import * as SkillSecrets from "../../../src/services/SkillSecrets.js"
import { serveProcess, type ServeProcess, writeServeConfig } from "../../support/cli.js"
import { until } from "../../support/poll.js"
import { freePort } from "../../support/ports.js"
import * as Postgres from "../../support/postgres.js"
import { psql } from "../../support/postgres.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const pg = await Postgres.start()
if ("skip" in pg) console.warn(`[gateway cluster request secrets] skipped: ${pg.skip}`)

const CLUSTER_SECRET = "s3cret-of-the-runners-0123456789"
const VALUE = "sk-erp-cluster-77c3-DO-NOT-LEAK"
const reversed = (text: string) => [...text].reverse().join("")
const COMMAND = "echo \"token:[$ERP_TOKEN]\"; printf '%s' \"$ERP_TOKEN\" | rev; echo"

const gateways: Array<TestGateway> = []
const servers: Array<ServeProcess> = []
const scope = Effect.runSync(Scope.make())
afterAll(async () => {
  for (const gateway of gateways) await gateway.stop().catch(() => {})
  for (const server of servers) server.child.kill("SIGKILL")
  await Effect.runPromise(Scope.close(scope, Exit.void))
  if ("stop" in pg) await pg.stop()
})

const SKILL =
  "---\nname: erp-report\ndescription: Pull a report from the ERP\nrequired-secrets:\n  - ERP_TOKEN\n---\n# ERP\n"

const script = (body: ChatRequestBody): Turn =>
  body.messages.at(-1)?.role === "tool"
    ? "Report pulled."
    : { toolCalls: [{ name: "bash", arguments: { description: "pull the report", command: COMMAND } }] }

const post = (gateway: TestGateway, path: string, body: unknown) =>
  fetch(`${gateway.url}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body)
  })

const owner = { userId: "alice", threadId: "t1", runId: "r1" }
const given = Redacted.make(new Map([["ERP_TOKEN", VALUE]])) as SkillSecrets.RequestSecrets

describe("SealedSecrets", () => {
  it("opens under the same cluster secret, for the same user and thread, unchanged; never shows a value", () => {
    const key = Redacted.make(CLUSTER_SECRET)
    const sealed = SealedSecrets.seal(key, owner, given)
    assert.notInclude(sealed, VALUE)
    assert.notStrictEqual(SealedSecrets.seal(key, owner, given), sealed, "a fresh nonce each time")
    const opened = SealedSecrets.open(key, owner, sealed)
    assert.isTrue(Either.isRight(opened))
    assert.strictEqual(SkillSecrets.entries(Either.getOrThrow(opened)).get("ERP_TOKEN"), VALUE)
    const other = Redacted.make("another-cluster-secret-000000")
    const tampered = sealed.slice(0, -2) + (sealed.endsWith("A") ? "BB" : "AA")
    for (
      const [secret, who, text] of [
        [other, owner, sealed],
        [key, { ...owner, userId: "bob" }, sealed],
        [key, { ...owner, threadId: "t2" }, sealed],
        [key, owner, tampered],
        [key, owner, "plain text"]
      ] as const
    ) {
      const refused = SealedSecrets.open(secret, who, text)
      assert.isTrue(Either.isLeft(refused))
      if (Either.isLeft(refused)) assert.notInclude(refused.left, VALUE)
    }
  })
})

describe.skipIf("skip" in pg)("request secrets in a cluster", () => {
  it("sealed between the runners: the skill's command gets them; no table holds a value", async () => {
    const url = await (pg as Postgres.Postgres).createDatabase()
    const dir = Support.tempDir("antler-cluster-secrets-")
    Fs.mkdirSync(Path.join(dir, "skills", "custom", "erp-report"), { recursive: true })
    Fs.writeFileSync(Path.join(dir, "skills", "custom", "erp-report", "SKILL.md"), SKILL)
    const home = Support.tempDir("antler-cluster-secrets-home-")
    for (let i = 0; i < 2; i++) {
      gateways.push(await Support.start({
        script,
        home,
        source: Path.join(dir, "config.yaml"),
        config: {
          database: { url },
          sandbox: { allow_host_bash: true },
          gateway: {
            heartbeat_seconds: 1,
            cluster: { runner_port: await freePort(), health_check_seconds: 1, secret: CLUSTER_SECRET }
          }
        }
      }))
    }
    const [a, b] = [gateways.at(-2)!, gateways.at(-1)!]
    const texts: Array<string> = []
    // threads owned by either runner, each run asked through either gateway
    for (let i = 0; i < 6; i++) {
      const thread = await (await post(a, "/threads", {})).json() as any
      const through = i % 2 === 0 ? a : b
      const answer = await post(through, `/threads/${thread.thread_id}/runs/wait`, {
        assistant_id: "lead_agent",
        input: Support.userInput("/erp-report pull"),
        context: { secrets: { ERP_TOKEN: VALUE } }
      })
      const text = await answer.text()
      assert.strictEqual(answer.status, 200, text)
      const state = await (await fetch(`${through.url}/threads/${thread.thread_id}/state`)).text()
      const tool = (JSON.parse(state).values.messages as ReadonlyArray<any>).filter((m) => m.type === "tool").at(-1)
      assert.include(String(tool.content), reversed(VALUE), `run ${i}`)
      assert.include(String(tool.content), "token:[[redacted]]")
      const runs = await (await fetch(`${through.url}/threads/${thread.thread_id}/runs`)).text()
      texts.push(text, state, runs)
    }
    for (const text of texts) assert.notInclude(text, VALUE)
    // every row of every table of the database, as text: the value in none (the runs' messages hold it sealed)
    const dump = await Effect.runPromise(Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const tables = yield* sql<{ table_name: string }>`
        SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'`
      const rows: Array<string> = []
      for (const { table_name } of tables) {
        const found = yield* sql.unsafe<{ row: string }>(`SELECT t::text AS row FROM "${table_name}" t`)
        rows.push(...found.map((r) => r.row))
      }
      return rows.join("\n")
    }).pipe(Effect.scoped, Effect.provide(PgClient.layer({ url: Redacted.make(url) }))))
    assert.include(dump, "erp-report", "the dump holds the runs")
    assert.include(dump, "antler-sealed-v1.", "the runs' durable messages hold their secrets sealed")
    assert.notInclude(dump, VALUE)
    assert.notInclude(dump, Buffer.from(VALUE).toString("base64"))
  }, 240_000)

  it("a cluster without gateway.cluster.secret refuses them with 422", async () => {
    const url = await (pg as Postgres.Postgres).createDatabase()
    const gateway = await Support.start({
      script,
      config: { database: { url }, gateway: { cluster: { runner_port: await freePort(), health_check_seconds: 1 } } }
    })
    gateways.push(gateway)
    const thread = await (await post(gateway, "/threads", {})).json() as any
    const answer = await post(gateway, `/threads/${thread.thread_id}/runs`, {
      assistant_id: "lead_agent",
      input: Support.userInput("/erp-report pull"),
      context: { secrets: { ERP_TOKEN: VALUE } }
    })
    const text = await answer.text()
    assert.strictEqual(answer.status, 422, text)
    assert.include(text, "without gateway.cluster.secret")
    assert.notInclude(text, VALUE)
  }, 120_000)

  it("a run whose runner is killed is resumed by the next runner with its secrets, opened there", async () => {
    const dbUrl = await (pg as Postgres.Postgres).createDatabase()
    // the run's first model call is held open (its runner is killed meanwhile); the resumed run's gets bash
    let calls = 0
    const model = await Effect.runPromise(Scope.extend(ScriptedChatServer.start((body): Turn => {
      if (calls++ === 0) return { hang: true }
      return script(body)
    }), scope))
    const home = Support.tempDir("antler-cluster-secrets-resume-")
    Fs.mkdirSync(Path.join(home, "skills", "custom", "erp-report"), { recursive: true })
    Fs.writeFileSync(Path.join(home, "skills", "custom", "erp-report", "SKILL.md"), SKILL)
    const start = async () => {
      const config = writeServeConfig(Path.join(home, `config-${servers.length}.yaml`), model.url, {
        database: { url: dbUrl },
        sandbox: { allow_host_bash: true },
        gateway: {
          cluster: { runner_port: await freePort(), health_check_seconds: 1, drain_seconds: 1, secret: CLUSTER_SECRET }
        }
      })
      const server = serveProcess(home, config)
      servers.push(server)
      return { server, url: await server.url }
    }
    const a = await start()
    const b = await start()
    const send = (base: string, path: string, body: unknown) =>
      fetch(`${base}${path}`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(body)
      })
    const thread = await (await send(a.url, "/threads", {})).json() as any
    const started = await send(a.url, `/threads/${thread.thread_id}/runs`, {
      assistant_id: "lead_agent",
      input: Support.userInput("/erp-report pull"),
      context: { secrets: { ERP_TOKEN: VALUE } }
    })
    assert.strictEqual(started.status, 200, await started.clone().text())
    const run = await started.json() as any
    await until(async () => calls > 0, "the run's model call")
    const leased = psql(dbUrl, `SELECT owner FROM antler_leases WHERE thread_id = '${thread.thread_id}'`)
    const pid = Number(leased.slice(leased.lastIndexOf(":") + 1))
    const victim = [a, b].find((s) => s.server.child.pid === pid)!
    assert.isDefined(victim, `lease owner ${leased}`)
    const survivor = victim === a ? b : a
    const exited = new Promise((resolve) => victim.server.child.once("exit", resolve))
    victim.server.child.kill("SIGKILL")
    await exited
    await until(async () => {
      const path = `/threads/${thread.thread_id}/runs/${run.run_id}`
      const record = await (await fetch(`${survivor.url}${path}`)).json() as any
      return record.status === "success"
    }, () => `the run resumed and ended: ${survivor.server.output()}`)
    assert.include(survivor.server.output(), `run ${run.run_id}: resumed here`)
    assert.notInclude(survivor.server.output(), "resumed without its request's secrets")
    const state = await (await fetch(`${survivor.url}/threads/${thread.thread_id}/state`)).text()
    const tool = (JSON.parse(state).values.messages as ReadonlyArray<any>).filter((m) => m.type === "tool").at(-1)
    assert.include(String(tool.content), reversed(VALUE))
    assert.include(String(tool.content), "token:[[redacted]]")
    for (const text of [state, survivor.server.output(), victim.server.output()]) assert.notInclude(text, VALUE)
    assert.notInclude(psql(dbUrl, "SELECT string_agg(t::text, ' ') FROM cluster_messages t"), VALUE)
  }, 240_000)
})
