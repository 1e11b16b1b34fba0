/**
 * The type an artifact is served with, as DeerFlow's gateway gives it: by its extension (audio and video too, so
 * the browser plays them and seeks with ranges), and a file of an unknown kind that holds no NUL byte is text, so a
 * script or a `notes` file opened from the app is shown rather than downloaded. Binary files stay bytes.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import JSZip from "jszip"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { threadPaths } from "../../../src/services/Sandbox.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const LARGE = Buffer.from(
  Array.from({ length: 3 * 1024 * 1024 / 16 }, (_, i) => `line ${String(i).padStart(9, "0")}\n`).join("")
)
const SKILL_MD = "---\nname: deep-search\ndescription: Search deeply\n---\n\n# Deep search ✓\n"

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
  Fs.mkdirSync(Path.join(outputs, "charts"))
  // past what is held in memory to be served (2 MiB): streamed from the disk
  Fs.writeFileSync(Path.join(outputs, "big.log"), LARGE)
  const zip = new JSZip()
  zip.file("deep-search/SKILL.md", SKILL_MD)
  zip.file("deep-search/scripts/run.py", "print('search')\n")
  // declares (and unpacks to) more than the 16 MiB a preview unpacks
  zip.file("deep-search/huge.txt", new Uint8Array(17 * 1024 * 1024))
  Fs.writeFileSync(
    Path.join(outputs, "deep-search.skill"),
    await zip.generateAsync({ type: "uint8array", compression: "DEFLATE" })
  )
  Fs.writeFileSync(Path.join(outputs, "fake.skill"), "not a zip archive")
  // more entries than a skill may hold (1,000): each would be an object the zip reader builds before any check
  const many = new JSZip()
  for (let i = 0; i <= 1000; i++) many.file(`${i}`, "")
  many.file("SKILL.md", SKILL_MD)
  Fs.writeFileSync(Path.join(outputs, "many.skill"), await many.generateAsync({ type: "uint8array" }))
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

describe("artifacts DeerFlow's app opens", () => {
  const detail = async (response: Response) => ((await response.json()) as { detail: string }).detail

  it("a folder is refused as no file (400, naming it)", async () => {
    const folder = await typeOf("charts")
    assert.strictEqual(folder.status, 400)
    assert.strictEqual(
      await detail(await fetch(folder.response.url)),
      "Path is not a file: /mnt/user-data/outputs/charts"
    )
  })

  it("a file larger than what is held in memory is streamed, whole or the range asked for", async () => {
    const url = `${gateway.url}/api/threads/${threadId}/artifacts/mnt/user-data/outputs/big.log`
    const whole = await fetch(url)
    assert.strictEqual(whole.status, 200)
    assert.match(whole.headers.get("content-type") ?? "", /^text\/plain/)
    assert.strictEqual(whole.headers.get("content-length"), String(LARGE.length))
    assert.isTrue(Buffer.from(await whole.arrayBuffer()).equals(LARGE))
    // the app's preview: its first MiB
    const preview = await fetch(url, { headers: { range: "bytes=0-1048575" } })
    assert.strictEqual(preview.status, 206)
    assert.strictEqual(preview.headers.get("content-range"), `bytes 0-1048575/${LARGE.length}`)
    assert.isTrue(Buffer.from(await preview.arrayBuffer()).equals(LARGE.subarray(0, 1048576)))
    const tail = await fetch(url, { headers: { range: "bytes=-16" } })
    assert.strictEqual(await tail.text(), LARGE.subarray(LARGE.length - 16).toString())
    const outside = await fetch(url, { headers: { range: `bytes=${LARGE.length}-` } })
    assert.strictEqual(outside.status, 416)
    assert.strictEqual(outside.headers.get("content-range"), `bytes */${LARGE.length}`)
  })

  // DeerFlow's app shows a `.skill` artifact by fetching `x.skill/SKILL.md` (with its preview range)
  it("serves the SKILL.md inside a .skill archive, and refuses what it cannot", async () => {
    const inside = (member: string, headers: Record<string, string> = {}) =>
      fetch(`${gateway.url}/api/threads/${threadId}/artifacts/mnt/user-data/outputs/${member}`, { headers })
    const skill = await inside("deep-search.skill/SKILL.md", { range: "bytes=0-1048575" })
    assert.strictEqual(skill.status, 206)
    assert.match(skill.headers.get("content-type") ?? "", /^text\/markdown/)
    assert.strictEqual(await skill.text(), SKILL_MD)
    const script = await inside("deep-search.skill/scripts/run.py")
    assert.strictEqual(script.status, 200)
    assert.strictEqual(await script.text(), "print('search')\n")
    const missing = await inside("deep-search.skill/README.md")
    assert.strictEqual(missing.status, 404)
    assert.strictEqual(await detail(missing), "File 'README.md' not found in skill archive.")
    const huge = await inside("deep-search.skill/huge.txt")
    assert.strictEqual(huge.status, 413)
    assert.strictEqual(await detail(huge), "Skill archive member is too large to preview.")
    const many = await inside("many.skill/SKILL.md")
    assert.strictEqual(many.status, 413)
    assert.strictEqual(await detail(many), "Skill archive is too large to preview.")
    assert.strictEqual((await inside("fake.skill/SKILL.md")).status, 404)
    assert.strictEqual((await inside("absent.skill/SKILL.md")).status, 404)
  })
})
