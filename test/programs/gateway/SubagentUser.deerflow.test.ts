/**
 * Mirrors DeerFlow's test_setup_agent_e2e_user_isolation.py::test_subgraph_invocation_preserves_user_id_in_runtime
 * (and its test_spoofed_context_in_body_config_is_overridden_by_inject): a subagent works as the user whose run
 * delegated to it. Alice's run, whose context names bob as its user, delegates a task; the subagent writes a file,
 * which is in alice's thread (her artifact; bob's request for it is a 404) and nowhere under bob's or the default
 * user's directories. Real HTTP through the gateway; the SCRIPTED model is reached with the real `openai` client.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Fs from "node:fs"
import * as Path from "node:path"
import type { ChatRequestBody, Turn } from "../../../src/layers/ScriptedChatServer.js"
import * as Requests from "../../support/requests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const CONTENT = "written by alice's subagent"

const script = (body: ChatRequestBody): Turn => {
  const last = body.messages.at(-1)
  // the subagent: its system prompt is the general-purpose subagent's
  if (JSON.stringify(body.messages[0]).includes("general-purpose subagent")) {
    if (last?.role === "tool") return "Sub done."
    const args = { description: "save it", path: "/mnt/user-data/outputs/sub.txt", content: CONTENT }
    return { toolCalls: [{ name: "write_file", arguments: args }] }
  }
  if (last?.role === "tool") return "Lead done."
  const args = { description: "save a file", prompt: "write the file", subagent_type: "general-purpose" }
  return { toolCalls: [{ name: "task", arguments: args }] }
}

let gateway: TestGateway
beforeAll(async () => {
  gateway = await Support.start({ script, config: { gateway: Support.twoUsers } })
})
afterAll(() => gateway?.stop())

const alice = Requests.as(() => gateway, Support.ALICE)
const bob = Requests.as(() => gateway, Support.BOB)

/** Every file named `name` under `dir`. */
const find = (dir: string, name: string): ReadonlyArray<string> =>
  Fs.existsSync(dir)
    ? (Fs.readdirSync(dir, { recursive: true }) as Array<string>)
      .filter((entry) => Path.basename(entry) === name)
      .map((entry) => Path.join(dir, entry))
    : []

describe("a subagent works as its run's user", () => {
  it("alice's subagent writes in alice's thread, whatever user her run's context names", async () => {
    const thread = await alice("POST", "/api/threads", {})
    assert.strictEqual(thread.status, 200, thread.text)
    const threadId = thread.json().thread_id
    const input = { messages: [{ type: "human", content: "delegate it" }] }
    const run = await alice("POST", `/api/threads/${threadId}/runs/wait`, {
      input,
      context: { subagent_enabled: true, user_id: "bob" },
      config: { configurable: { user_id: "bob" } }
    })
    assert.strictEqual(run.status, 200, run.text)
    const subagentCall = gateway.scripted.requests.find((r) => JSON.stringify(r.messages[0]).includes("general-purpose"))
    assert.isDefined(subagentCall, "the subagent ran")

    const artifact = `/api/threads/${threadId}/artifacts/mnt/user-data/outputs/sub.txt`
    const mine = await alice("GET", artifact)
    assert.strictEqual(mine.status, 200, mine.text)
    assert.strictEqual(mine.text, CONTENT)
    assert.strictEqual((await bob("GET", artifact)).status, 404)

    const users = Path.join(gateway.home, "users")
    const written = find(users, "sub.txt")
    assert.strictEqual(written.length, 1, written.join(", "))
    assert.isTrue(written[0]!.startsWith(Path.join(users, "alice") + Path.sep), written[0])
    assert.deepStrictEqual(find(Path.join(users, "bob"), "sub.txt"), [])
    assert.deepStrictEqual(find(Path.join(users, "default"), "sub.txt"), [])
  }, 30_000)
})
