/**
 * Attack round 30 on the storage quotas through the artifact panel's edit (`PUT /api/threads/{id}/artifacts/...`),
 * which replaces an output file's text with up to 2 MiB: it was written without being admitted, where an upload, a
 * copy and a branch are held to `gateway.quotas.max_user_bytes`. A user past the quota, their uploads refused, grew
 * each empty file a run had made (a `touch` costs nothing against `sandbox.disk_quota_mb`) to 2 MiB, as many as they
 * liked. Now an edit that grows a file is admitted as an upload is: past the quota it is a 403 naming it, the file
 * unchanged. On SQLite; the model is SCRIPTED (the real `openai` client against a loopback server).
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Crypto from "node:crypto"
import * as Fs from "node:fs"
import * as Path from "node:path"
import type { ChatRequestBody, Turn } from "../../../src/layers/ScriptedChatServer.js"
import * as ThreadIds from "../../../src/programs/gateway/ThreadIds.js"
import { threadPaths } from "../../../src/services/Sandbox.js"
import * as Requests from "../../support/requests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const KiB = 1024
const LIMIT = 1024 * KiB
const FILES = ["a.txt", "b.txt", "c.txt"]

/** The run writes three small files into the thread's outputs, then answers. */
const script = (body: ChatRequestBody): Turn =>
  body.messages.at(-1)?.role === "tool" ? "Saved." : {
    toolCalls: FILES.map((name) => ({
      name: "write_file",
      arguments: { description: "save", path: `/mnt/user-data/outputs/${name}`, content: "x\n" }
    }))
  }

const sha = (bytes: string | Uint8Array) => Crypto.createHash("sha256").update(bytes).digest("hex")

let gateway: TestGateway
beforeAll(async () => {
  gateway = await Support.start({
    script,
    config: { gateway: { ...Support.twoUsers, quotas: { max_user_bytes: LIMIT } } }
  })
}, 60_000)
afterAll(async () => {
  await gateway?.stop().catch(() => {})
})

const alice = Requests.as(() => gateway, Support.ALICE)

describe("artifact edits past max_user_bytes", () => {
  it("an edit that would pass the quota is a 403 naming it, and the file is unchanged", async () => {
    assert.strictEqual((await alice("POST", "/api/threads", { thread_id: "work" })).status, 200)
    const run = await alice("POST", "/api/threads/work/runs/wait", {
      assistant_id: "lead_agent",
      input: Support.userInput("save the files")
    })
    assert.strictEqual(run.status, 200, run.text)
    const outputs = threadPaths(gateway.home, "alice", `work${ThreadIds.tagOf("alice")}`).outputs
    const edit = (name: string, content: string) =>
      alice("PUT", `/api/threads/work/artifacts/mnt/user-data/outputs/${name}`, {
        content,
        expected_sha256: sha(Fs.readFileSync(Path.join(outputs, name)))
      })
    const large = "y".repeat(600 * KiB)
    // the first fits the quota
    const first = await edit("a.txt", large)
    assert.strictEqual(first.status, 200, first.text)
    // the second would take the user's files past it
    const second = await edit("b.txt", large)
    assert.strictEqual(second.status, 403, second.text.slice(0, 300))
    assert.include(second.json().detail, "gateway.quotas.max_user_bytes")
    assert.strictEqual(Fs.readFileSync(Path.join(outputs, "b.txt"), "utf8"), "x\n")
    // an edit that does not grow its file is not refused
    const shrink = await edit("a.txt", "z\n")
    assert.strictEqual(shrink.status, 200, shrink.text)
  }, 120_000)
})
