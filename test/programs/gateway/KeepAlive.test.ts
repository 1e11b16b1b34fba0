/**
 * The gateway keeps an idle keep-alive connection open longer than the clients' pools keep theirs: a client
 * that sends its next request on a connection idle for a few seconds (as the SDK's pool does under load) is
 * answered on it, not reset as the server closes it (Node's default closed it after 5 s).
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
})
