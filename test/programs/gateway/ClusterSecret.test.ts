/**
 * The runners' port of a cluster with `gateway.cluster.secret`: two gateways on one PostgreSQL database share a
 * secret and work as a cluster (runs routed between them end); a client of `runner_port` that does not answer the
 * runner's challenge with the secret (no answer, or one under another secret) is closed without an answer to its
 * message, while one that answers with the secret gets it. A secret too short is refused at the start. Skipped,
 * saying why, without PostgreSQL.
 */
import { afterAll, assert, describe, it } from "@effect/vitest"
import * as RpcSerialization from "@effect/rpc/RpcSerialization"
import * as Redacted from "effect/Redacted"
import * as Net from "node:net"
import * as RunnerSocket from "../../../src/programs/gateway/cluster/RunnerSocket.js"
import * as Postgres from "../../support/postgres.js"
import { freePort } from "../../support/ports.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const pg = await Postgres.start()
if ("skip" in pg) console.warn(`[gateway cluster secret] skipped: ${pg.skip}`)

const SECRET = "s3cret-of-the-runners-0123456789"

const gateways: Array<TestGateway> = []
afterAll(async () => {
  for (const gateway of gateways) await gateway.stop().catch(() => {})
  if ("stop" in pg) await pg.stop()
})

/**
 * What a client of `port` receives until the runner closes the connection (or 8 s passed: the runner waits 5 s
 * for an answer). It sends a Ping of the runners' RPC protocol: at once when it has no `respond`, else after the
 * challenge came, behind `respond`'s answer to it.
 */
const probe = (port: number, respond?: (challenge: Uint8Array) => Uint8Array) =>
  new Promise<{ readonly received: Buffer; readonly closed: boolean }>((resolve) => {
    const ping = RpcSerialization.msgPack.unsafeMake().encode({ _tag: "Ping" }) as Uint8Array
    const socket = Net.createConnection({ host: "127.0.0.1", port })
    if (respond === undefined) socket.once("connect", () => socket.write(ping))
    let received = Buffer.alloc(0)
    let sent = respond === undefined
    const timer = setTimeout(() => {
      socket.destroy()
      resolve({ received, closed: false })
    }, 8000)
    socket.on("data", (chunk) => {
      received = Buffer.concat([received, chunk])
      if (!sent && received.length >= RunnerSocket.CHALLENGE_BYTES) {
        sent = true
        socket.write(Buffer.concat([respond!(received.subarray(0, RunnerSocket.CHALLENGE_BYTES)), ping]))
      }
    })
    socket.on("error", () => {})
    socket.on("close", () => {
      clearTimeout(timer)
      resolve({ received, closed: true })
    })
  })

/** The RPC messages after the challenge. */
const answers = (received: Buffer) => {
  const rest = received.subarray(RunnerSocket.CHALLENGE_BYTES)
  return rest.length === 0 ? [] : (RpcSerialization.msgPack.unsafeMake().decode(rest) as Array<{ _tag: string }>)
}

describe("gateway.cluster.secret refused", () => {
  it("a secret shorter than 16 characters: the start says so", async () => {
    const started = await Support.start({
      script: () => "hi",
      config: { gateway: { cluster: { runner_port: 4000, secret: "short" } } }
    }).then((gateway) => (gateways.push(gateway), "started"), (error) => String(error))
    assert.include(started, "gateway.cluster.secret must be at least 16 characters")
    assert.notInclude(started, SECRET)
  })
})

describe.skipIf("skip" in pg)("a cluster's runner port with a secret", () => {
  it("runners sharing the secret work together; a client without it is closed unanswered", async () => {
    const url = await (pg as Postgres.Postgres).createDatabase()
    const home = Support.tempDir("antler-gw-cluster-secret-")
    const ports: Array<number> = []
    for (let i = 0; i < 2; i++) {
      const runnerPort = await freePort()
      ports.push(runnerPort)
      gateways.push(await Support.start({
        script: () => "Routed answer.",
        home,
        config: {
          database: { url },
          gateway: { cluster: { runner_port: runnerPort, health_check_seconds: 1, secret: SECRET } }
        }
      }))
    }
    const [a, b] = [gateways.at(-2)!, gateways.at(-1)!]

    // runs started through one gateway, on threads owned by either runner, end
    for (let i = 0; i < 6; i++) {
      const thread = await (await fetch(`${a.url}/threads`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: "{}"
      })).json() as any
      const response = await fetch(`${(i % 2 === 0 ? b : a).url}/threads/${thread.thread_id}/runs/wait`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ assistant_id: "lead_agent", input: { messages: [{ type: "human", content: "hello" }] } })
      })
      assert.strictEqual(response.status, 200, await response.clone().text())
      const values = await response.json() as any
      assert.strictEqual(values.messages.at(-1).content, "Routed answer.")
    }

    // a client that does not know the secret (it sends its Ping at once), or answers with another secret: closed,
    // the Ping unanswered (it received the challenge only)
    const silent = await probe(ports[0]!)
    assert.isTrue(silent.closed, "closed")
    assert.strictEqual(silent.received.length, RunnerSocket.CHALLENGE_BYTES)
    // with the secret's answer the runner answers the Ping: the probe sees an accepted connection
    const proven = await probe(ports[0]!, (challenge) => RunnerSocket.answer(Redacted.make(SECRET), challenge))
    assert.deepStrictEqual(answers(proven.received).map((m) => m._tag), ["Pong"])
    const wrong = await probe(
      ports[1]!,
      (challenge) => RunnerSocket.answer(Redacted.make("another-secret-0123456789"), challenge)
    )
    assert.isTrue(wrong.closed, "closed")
    assert.strictEqual(wrong.received.length, RunnerSocket.CHALLENGE_BYTES)
  }, 120_000)
})

describe.skipIf("skip" in pg)("a cluster's runner port in use", () => {
  it("stops the start, saying where and which setting chooses another port (not the socket's bare \"Open\")", async () => {
    const url = await (pg as Postgres.Postgres).createDatabase()
    const taken = Net.createServer()
    await new Promise<void>((resolve) => taken.listen(0, "127.0.0.1", resolve))
    const port = (taken.address() as Net.AddressInfo).port
    try {
      const started = await Support.start({
        script: () => "hi",
        config: { database: { url }, gateway: { cluster: { runner_port: port, secret: SECRET } } }
      }).then((gateway) => (gateways.push(gateway), "started"), (error) => String(error))
      assert.include(
        started,
        `the cluster's runner cannot listen on 127.0.0.1:${port}: the address is in use (another antler serve, or ` +
          "another program, listens there); stop it, or choose another port with gateway.cluster.runner_port"
      )
    } finally {
      await new Promise((resolve) => taken.close(resolve))
    }
  }, 60_000)
})
