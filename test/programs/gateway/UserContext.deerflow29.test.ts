/**
 * DeerFlow's `test_user_context.py`, its cases a user can reach, through a real gateway with two token users: the
 * run's user is the one its token says, never a `user_id` the client writes in `config.configurable` or `context`
 * (DeerFlow's `test_config_user_id_prefers_server_auth_over_client_user_id`,
 * `test_runtime_langgraph_auth_takes_precedence_over_context_user_id`): what the run writes is the token user's,
 * and the user it names sees none of it. Its other cases are Python's contextvars and LangGraph's runtime config.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import type { ChatRequestBody } from "../../../src/layers/ScriptedChatServer.js"
import { as } from "../../support/requests.js"
import * as Support from "./support.js"

/** Writes a note to the thread's workspace, then says so. */
const script = (body: ChatRequestBody) =>
  body.messages.some((m) => m.role === "tool")
    ? "Noted."
    : { toolCalls: [{ name: "write_file", arguments: { description: "w", path: "/mnt/user-data/workspace/note.md", content: "alice's note\n" } }] }

let gateway: Support.TestGateway
beforeAll(async () => {
  gateway = await Support.start({ script, config: { gateway: Support.twoUsers } })
})
afterAll(() => gateway.stop())

const alice = as(() => gateway, Support.ALICE)
const bob = as(() => gateway, Support.BOB)

describe("test_user_context.py", () => {
  it("test_config_user_id_prefers_server_auth_over_client_user_id (and the runtime context's)", async () => {
    const thread = (await alice("POST", "/api/threads", { thread_id: "claimed-by-bob" })).json()
    const run = await alice("POST", `/api/threads/${thread.thread_id}/runs/wait`, {
      assistant_id: "lead_agent",
      input: Support.userInput("write the note"),
      config: { configurable: { user_id: "bob" } },
      context: { user_id: "bob" }
    })
    assert.strictEqual(run.status, 200, run.text)
    // the thread, its run and its file are alice's
    const runs = (await alice("GET", `/api/threads/${thread.thread_id}/runs`)).json()
    assert.deepStrictEqual(runs.map((r: any) => r.status), ["success"], JSON.stringify([run.json(), runs]))
    const file = await alice("GET", `/api/threads/${thread.thread_id}/artifacts/mnt/user-data/workspace/note.md`)
    assert.deepStrictEqual([file.status, file.text], [200, "alice's note\n"])
    // bob, whom the client named, has none of it: the id is, for him, a thread nobody has
    assert.strictEqual((await bob("GET", `/api/threads/${thread.thread_id}/runs`)).status, 404)
    assert.strictEqual(
      (await bob("GET", `/api/threads/${thread.thread_id}/artifacts/mnt/user-data/workspace/note.md`)).status,
      404
    )
    const bobs = (await bob("POST", "/threads/search", {})).json()
    assert.deepStrictEqual(bobs, [])
  })
})
