/**
 * The type an artifact is served with, as DeerFlow's gateway gives it: by its extension (audio and video too, so
 * the browser plays them and seeks with ranges), and a file of an unknown kind that holds no NUL byte is text, so a
 * script or a `notes` file opened from the app is shown rather than downloaded. Binary files stay bytes.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { threadPaths } from "../../../src/services/Sandbox.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

let gateway: TestGateway
let threadId = ""

beforeAll(async () => {
  gateway = await Support.start({ script: () => "Hello." })
  const response = await fetch(`${gateway.url}/threads`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: "{}"
  })
  threadId = ((await response.json()) as { thread_id: string }).thread_id
  const outputs = threadPaths(gateway.home, "default", threadId).outputs
  Fs.mkdirSync(outputs, { recursive: true })
  Fs.writeFileSync(Path.join(outputs, "plot.py"), "print('hi')\n")
  Fs.writeFileSync(Path.join(outputs, "NOTES"), "plain words, no extension\n")
  Fs.writeFileSync(Path.join(outputs, "run.out"), "step 1 done\n")
  Fs.writeFileSync(Path.join(outputs, "data.out"), Buffer.from([1, 2, 0, 3, 4]))
  Fs.writeFileSync(Path.join(outputs, "song.mp3"), Buffer.from([0xff, 0xfb, 0x90, 0x00, 1, 2, 3]))
  Fs.writeFileSync(Path.join(outputs, "clip.mp4"), Buffer.from([0, 0, 0, 0x18, 0x66, 0x74, 0x79, 0x70]))
})
afterAll(async () => {
  await gateway?.stop()
})

const typeOf = async (name: string, headers: Record<string, string> = {}) => {
  const response = await fetch(`${gateway.url}/api/threads/${threadId}/artifacts/mnt/user-data/outputs/${name}`, {
    headers
  })
  await response.arrayBuffer()
  return { status: response.status, type: response.headers.get("content-type") ?? "", response }
}

describe("artifact content types", () => {
  it("a script and a text file without a known extension are served as text, inline", async () => {
    const script = await typeOf("plot.py")
    assert.strictEqual(script.status, 200)
    assert.match(script.type, /^text\/x-python/)
    assert.match(script.response.headers.get("content-disposition") ?? "", /^inline;/)
    assert.match((await typeOf("NOTES")).type, /^text\/plain/)
    assert.match((await typeOf("run.out")).type, /^text\/plain/)
  })

  it("a file with a NUL byte and no known extension stays bytes", async () => {
    assert.strictEqual((await typeOf("data.out")).type, "application/octet-stream")
  })

  it("audio and video are typed, and a range of them is served", async () => {
    assert.strictEqual((await typeOf("song.mp3")).type, "audio/mpeg")
    const seek = await typeOf("clip.mp4", { range: "bytes=4-" })
    assert.strictEqual(seek.status, 206)
    assert.strictEqual(seek.type, "video/mp4")
    assert.strictEqual(seek.response.headers.get("content-range"), "bytes 4-7/8")
  })
})
