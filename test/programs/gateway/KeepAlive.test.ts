/**
 * The gateway keeps an idle keep-alive connection open longer than the clients' pools keep theirs: a client
 * that sends its next request on a connection idle for a few seconds (as the SDK's pool does under load) is
 * answered on it, not reset as the server closes it (Node's default closed it after 5 s). Stopping the gateway
 * does not wait for its clients: it closes such idle connections, and the connections of streams it stopped (they
 * stayed open a minute, until Node's own timeouts).
 */
import * as Net from "node:net"
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

let gateway: TestGateway

beforeAll(async () => {
  gateway = await Support.start({ script: () => "Hello." })
})
afterAll(() => gateway.stop())

/** Reads from the socket until `text` holds one whole response to `GET /ok` (or the socket ends). */
const answer = (socket: Net.Socket): Promise<string> =>
  new Promise((resolve) => {
    let text = ""
    const done = () => {
      socket.off("data", onData)
      socket.off("close", done)
      resolve(text)
    }
    const onData = (chunk: Buffer) => {
      text += chunk.toString("latin1")
      if (/\r\n\r\n[\s\S]*\}/.test(text)) done()
    }
    socket.on("data", onData)
    socket.on("close", done)
  })

describe("keep-alive", () => {
  it("a connection idle for 6 seconds still takes the client's next request", async () => {
    const { port } = new URL(gateway.url)
    const socket = Net.connect(Number(port), "127.0.0.1")
    await new Promise<void>((resolve) => socket.once("connect", () => resolve()))
    let closed = false
    socket.on("close", () => (closed = true))
    const request = `GET /ok HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nConnection: keep-alive\r\n\r\n`
    socket.write(request)
    const first = await answer(socket)
    assert.match(first, /^HTTP\/1\.1 200/)
    assert.match(first, /keep-alive/i)
    await new Promise((resolve) => setTimeout(resolve, 6000))
    assert.isFalse(closed, "the gateway closed the idle connection")
    socket.write(request)
    const second = await answer(socket)
    assert.match(second, /^HTTP\/1\.1 200/)
    socket.destroy()
  }, 20_000)

  it("stopping the gateway closes its connections, streams under way included, instead of waiting for their clients", async () => {
    const stopping = await Support.start({ script: () => ({ content: "Thinking", stall: true }) })
    const { port } = new URL(stopping.url)
    const connect = async () => {
      const socket = Net.connect(Number(port), "127.0.0.1")
      await new Promise<void>((resolve) => socket.once("connect", () => resolve()))
      return { socket, closed: new Promise<void>((resolve) => socket.once("close", () => resolve())) }
    }
    // an idle keep-alive connection (a client's pool keeps it as long as the server says it keeps it)
    const idle = await connect()
    idle.socket.write(`GET /ok HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nConnection: keep-alive\r\n\r\n`)
    assert.match(await answer(idle.socket), /^HTTP\/1\.1 200/)
    // a run streaming (its model stalls), its client reading on
    const thread = await (await fetch(`${stopping.url}/threads`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: "{}"
    })).json() as { thread_id: string }
    const streaming = await connect()
    const body = JSON.stringify({ assistant_id: "lead_agent", input: { messages: [{ type: "human", content: "Hi" }] } })
    streaming.socket.write(
      `POST /threads/${thread.thread_id}/runs/stream HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n` +
        `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`
    )
    await new Promise<void>((resolve) => {
      let text = ""
      const onData = (chunk: Buffer) => {
        text += chunk.toString("latin1")
        if (text.includes("event: metadata")) {
          streaming.socket.off("data", onData)
          resolve()
        }
      }
      streaming.socket.on("data", onData)
    })
    // the gateway stops all the same, and closes both
    await stopping.stop()
    await Promise.all([idle.closed, streaming.closed])
  }, 30_000)
})
