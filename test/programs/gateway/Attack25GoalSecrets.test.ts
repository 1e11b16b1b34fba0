/**
 * Attack round 25 on a gateway run's request secrets (`context.secrets`) and the thread's goal: a run given them
 * writes its checkpoints with every value hidden (`RunSecretsStore`), but the goal loop's evaluator, a model call of
 * the same run, recorded its verdict (its reason, on the thread's goal) through the gateway's own store, which hides
 * only the process's secrets. A hostile model that read a form of the value nothing masks (the server's reversed echo,
 * said back in the agent's answer) writes the value itself in its verdict: the stream hid it, the thread's state and
 * the database kept it; an answer that is no verdict, quoting the value, was logged as it was. A real stdio MCP
 * server naming `${secret:ERP_TOKEN}` in its env.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import type { ChatRequestBody, Turn } from "../../../src/layers/ScriptedChatServer.js"
import { contentText } from "../../../src/state/Message.js"
import { isEvaluator, verdict } from "../../support/goalScript.js"
import { captureLogs } from "../../support/logs.js"
import * as Servers from "../../support/mcpServers.js"
import { messageText } from "../../support/modelRequests.js"
import * as Requests from "../../support/requests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"
import { filesHolding } from "../../support/filesHolding.js"

const ROOT = Path.resolve(Path.dirname(fileURLToPath(import.meta.url)), "../../..")
const ECHO = Path.join(ROOT, "test/fixtures/echo-secrets-mcp.mjs")
const MARK = "DO-NOT-LEAK"
const SECRET = `sk-erp-goal-7c1e-${MARK}`
const SLOW = 120_000

let gateway: TestGateway
const logs = captureLogs("Warning")
const alice = Requests.as(() => gateway, Support.ALICE)

const reversed = (text: string) => [...text].reverse().join("")

/**
 * The agent: calls the server, then says its reversed echo back (a form nothing masks). The evaluator: reads that
 * form in the conversation it is shown, and writes the value itself in its verdict's reason.
 */
const script = (body: ChatRequestBody): Turn => {
  if (isEvaluator(body)) {
    const seen = /rev:\[([^\]]+)\]/.exec(body.messages.map(messageText).join("\n"))?.[1]
    const value = seen === undefined ? "nothing" : reversed(seen)
    // (asked about a thread whose question says "garbled": an answer that is no verdict, holding the value)
    if (body.messages.map(messageText).join("\n").includes("garbled")) return JSON.stringify({ satisfied: value })
    return verdict(false, "needs_user_input", `The ERP refused the token ${value}; the user must give another.`)
  }
  const last = body.messages.at(-1)
  if (last?.role === "tool") {
    const rev = /rev:\[([^\]]+)\]/.exec(contentText(last.content as never))?.[1] ?? ""
    return `The server said rev:[${rev}].`
  }
  return { toolCalls: [{ name: "echo_whoami", arguments: {} }] }
}

beforeAll(async () => {
  const echo = { type: "stdio", command: process.execPath, args: [ECHO, "stdio"] }
  gateway = await Support.startOverMcp("antler-attack25-goal-", {
    echo: { ...Servers.server(echo), env: { ERP_TOKEN: "${secret:ERP_TOKEN}" } }
  }, { script, logger: logs.capture })
}, SLOW)
afterAll(() => gateway?.stop())

/** A streamed run asking `question` on a new thread `thread` whose goal is active, given the secret. */
const goalRun = async (thread: string, question: string) => {
  assert.strictEqual((await alice("POST", "/threads", { thread_id: thread })).status, 200)
  const put = await alice("PUT", `/api/threads/${thread}/goal`, { objective: "Get the ERP report" })
  assert.strictEqual(put.status, 200, put.text)
  const stream = await alice("POST", `/threads/${thread}/runs/stream`, {
    assistant_id: "lead_agent",
    input: Support.userInput(question),
    context: { secrets: { ERP_TOKEN: SECRET } },
    stream_mode: ["values", "updates", "custom"]
  })
  assert.strictEqual(stream.status, 200, stream.text)
  return stream
}

describe("Attack25: the goal evaluator of a run given request secrets", () => {
  it("its verdict's reason keeps none of the run's values in the thread, its history or the database", async () => {
    const thread = "goal-secret"
    const stream = await goalRun(thread, "fetch the report")
    // the evaluator was asked, and wrote the value out (its reason is the goal's, masked)
    const goal = await alice("GET", `/api/threads/${thread}/goal`)
    assert.include(goal.text, "The ERP refused the token [redacted]", goal.text)
    const state = await alice("GET", `/threads/${thread}/state`)
    const history = await alice("POST", `/threads/${thread}/history`, {})
    const stored = JSON.stringify(await Effect.runPromise(gateway.store.load(thread)))
    const seen = { stream: stream.text, goal: goal.text, state: state.text, history: history.text, stored }
    for (const [where, text] of Object.entries(seen)) assert.notInclude(text, MARK, where)
    assert.deepStrictEqual(filesHolding(gateway.home, MARK), [])
  }, SLOW)

  it("an answer that is no verdict, quoting the value, is logged without it", async () => {
    await goalRun("goal-garbled", "fetch the garbled report")
    const warned = logs.logged.filter((line) => line.includes("Goal evaluator failed"))
    assert.isNotEmpty(warned, logs.logged.join("\n"))
    assert.include(warned.join("\n"), "[redacted]")
    assert.notInclude(logs.logged.join("\n"), MARK)
  }, SLOW)
})
