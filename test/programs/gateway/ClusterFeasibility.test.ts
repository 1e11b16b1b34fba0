/**
 * Issue 30, step 1: can @effect/cluster (0.60, the Effect 3 line) carry Antler's threads across processes on
 * the PostgreSQL the tests start? Two runner processes (test/programs/gateway/cluster/feasibilityRunner.ts)
 * share one database; every thread is an entity owned by one of them; a message sent from either process
 * reaches the owner, plain and persisted. Skipped, saying why, without PostgreSQL.
 */
import { afterAll, assert, describe, it } from "@effect/vitest"
import * as ChildProcess from "node:child_process"
import * as Path from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"
import * as Postgres from "../../support/postgres.js"
import { freePort } from "../../support/ports.js"

const pg = await Postgres.start()
if ("skip" in pg) console.warn(`[cluster feasibility] skipped: ${pg.skip}`)

const ROOT = Path.resolve(Path.dirname(fileURLToPath(import.meta.url)), "../../..")
const TSX = pathToFileURL(Path.join(ROOT, "node_modules/tsx/dist/loader.mjs")).href
const RUNNER = Path.join(ROOT, "test/programs/gateway/cluster/feasibilityRunner.ts")

const children: Array<ChildProcess.ChildProcess> = []
afterAll(async () => {
  for (const child of children) child.kill("SIGKILL")
  if ("stop" in pg) await pg.stop()
})

const startRunner = async (url: string) => {
  const runnerPort = await freePort()
  const httpPort = await freePort()
  const child = ChildProcess.spawn(process.execPath, ["--import", TSX, RUNNER, url, String(runnerPort), String(httpPort)], {
    stdio: ["ignore", "pipe", "pipe"]
  })
  children.push(child)
  let log = ""
  child.stderr!.on("data", (chunk) => (log += chunk))
  await new Promise<void>((resolve, reject) => {
    child.stdout!.on("data", (chunk) => {
      log += chunk
      if (String(chunk).includes("ready")) resolve()
    })
    child.once("exit", (code) => reject(new Error(`runner exited (${code}): ${log}`)))
  })
  return { runnerPort, http: `http://127.0.0.1:${httpPort}`, log: () => log }
}

const ask = async (http: string, path: string) => {
  const response = await fetch(`${http}${path}`)
  const text = await response.text()
  if (response.status !== 200) throw new Error(`${path}: ${response.status} ${text}`)
  return JSON.parse(text) as { readonly runner: number; readonly asked: number; readonly thread?: string }
}

describe.skipIf("skip" in pg)("@effect/cluster over PostgreSQL (feasibility)", () => {
  it("two runners: a thread's messages reach the runner owning its shard from either process", async () => {
    const url = await (pg as Postgres.Postgres).createDatabase()
    const a = await startRunner(url)
    const b = await startRunner(url)
    const threads = Array.from({ length: 40 }, (_, i) => `thread-${i}`)
    // shards are assigned as runners register (and rebalanced when the second one joins): ask from both
    // processes until they agree and ownership is split between the two runners
    const ownersFrom = async (http: string) => {
      const owners = new Map<string, number>()
      for (const thread of threads) {
        const answer = await ask(http, `/ask?thread=${thread}`)
        assert.strictEqual(answer.thread, thread)
        owners.set(thread, answer.runner)
      }
      return owners
    }
    let owners = new Map<string, number>()
    for (let attempt = 0; attempt < 60; attempt++) {
      owners = await ownersFrom(a.http)
      const fromB = await ownersFrom(b.http)
      if (new Set(owners.values()).size === 2 && [...owners].every(([t, runner]) => fromB.get(t) === runner)) break
      await new Promise((resolve) => setTimeout(resolve, 500))
    }
    assert.deepStrictEqual(new Set(owners.values()), new Set([a.runnerPort, b.runnerPort]), a.log() + b.log())
    assert.deepStrictEqual(await ownersFrom(b.http), owners)
    // a persisted message (stored in PostgreSQL, then delivered) reaches the owner from either process
    for (const thread of threads) {
      for (const from of [a, b]) {
        const persisted = await ask(from.http, `/persisted?thread=${thread}`)
        assert.strictEqual(persisted.runner, owners.get(thread), thread)
        assert.strictEqual(persisted.asked, from.runnerPort)
      }
    }
  }, 120_000)
})
