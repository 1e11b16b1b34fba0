/**
 * A skill's request-scoped secrets (`required-secrets`, `context.secrets`) reach the `bash` commands of a subagent
 * the run delegates the skill's work to, as they reach the lead's: the skills whose secrets the lead had bound when
 * it called `task` (slash-activated by the user, or loaded) bind them for the subagent too, where the subagent's
 * skills allow them, as do the skills the subagent loads itself. Through the gateway, with the commands run by the
 * real local sandbox (bubblewrap), and the model SCRIPTED (the real `openai` client against a loopback server).
 * Nothing a user or the model reads holds a value: the subagent's events, the parent's thread, its run record and
 * run events, the requests the model is sent. A subagent of a run whose skills need no secrets gets none, nor one
 * whose type may not use the skill, nor one the lead model tells to `/activate` a skill that binds only when the
 * user asks for it (`secrets-autonomous: false`).
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Fs from "node:fs"
import * as Path from "node:path"
import type { ChatRequestBody, Turn } from "../../../src/layers/ScriptedChatServer.js"
import { contentText } from "../../../src/state/Message.js"
import * as Requests from "../../support/requests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const SECRET = "sk-erp-sub26-5e1f-DO-NOT-LEAK"
const SLOW = 60_000

const reversed = (text: string) => [...text].reverse().join("")

// (the value reversed is what proves the command got it: the value itself is masked)
const COMMAND = "echo \"token:[$ERP_TOKEN]\"; printf '%s' \"$ERP_TOKEN\" | rev; echo; echo \"sandbox:[$HOSTNAME]\""

const systemOf = (body: ChatRequestBody) => contentText(body.messages[0]?.content as never)
const isSubagent = (body: ChatRequestBody) => !systemOf(body).trimStart().startsWith("<role>")
const toolMessages = (body: ChatRequestBody) => body.messages.filter((m) => m.role === "tool")
const skillPath = (name: string) => `/mnt/skills/custom/${name}/SKILL.md`

/**
 * The lead: "load <skill>" reads its SKILL.md first; then it delegates, to the type named by "via <type>", the task
 * after "task:" (by default: run the report script). The subagent: "read <skill>" in its task reads that SKILL.md
 * first; then it runs the command, and answers with what it printed.
 */
const script = (body: ChatRequestBody): Turn => {
  const text = Support.lastUserText(body)
  const tools = toolMessages(body)
  const bash = { toolCalls: [{ name: "bash", arguments: { description: "pull the report", command: COMMAND } }] }
  if (isSubagent(body)) {
    const reading = /read ([a-z-]+)/.exec(text)
    if (tools.length === 0 && reading !== null) {
      return { toolCalls: [{ name: "read_file", arguments: { description: "read it", path: skillPath(reading[1]!) } }] }
    }
    const last = body.messages.at(-1)!
    return last.role === "tool" && tools.length === (reading === null ? 1 : 2)
      ? `Sub saw: ${contentText(last.content as never)}`
      : bash
  }
  const loading = /load ([a-z-]+)/.exec(text)
  if (tools.length === 0 && loading !== null) {
    return { toolCalls: [{ name: "read_file", arguments: { description: "read it", path: skillPath(loading[1]!) } }] }
  }
  if (body.messages.at(-1)?.role === "tool" && toolMessages(body).at(-1)?.content?.toString().includes("Task")) {
    return "Parent done."
  }
  const type = /via ([a-z-]+)/.exec(text)?.[1] ?? "general-purpose"
  const prompt = /task: ([^\n]*)/.exec(text)?.[1] ?? "Run the report script."
  return { toolCalls: [{ name: "task", arguments: { description: "pull the report", prompt, subagent_type: type } }] }
}

const skill = (name: string, extra = "") =>
  `---\nname: ${name}\ndescription: Pull a report from the ERP\nrequired-secrets:\n  - ERP_TOKEN\n${extra}---\n` +
  `# ${name}\n\nRun the report script.\n`

let gateway: TestGateway
const alice = Requests.as(() => gateway, Support.ALICE)
const bob = Requests.as(() => gateway, Support.BOB)
const BOB_SECRET = "sk-erp-bob26-77aa-DO-NOT-LEAK"

beforeAll(async () => {
  const dir = Support.tempDir("antler-subskills26-secrets-")
  for (const [name, extra] of [["erp-report", ""], ["sealed-report", "secrets-autonomous: false\n"]] as const) {
    Fs.mkdirSync(Path.join(dir, "skills", "custom", name), { recursive: true })
    Fs.writeFileSync(Path.join(dir, "skills", "custom", name, "SKILL.md"), skill(name, extra))
  }
  gateway = await Support.start({
    script,
    source: Path.join(dir, "config.yaml"),
    config: {
      gateway: Support.twoUsers,
      // (no allow_host_bash: the commands run in bubblewrap, or not at all)
      subagents: {
        custom_agents: {
          outsider: { description: "Works without skills", system_prompt: "You are an outsider.", skills: [] }
        }
      }
    }
  })
}, SLOW)
afterAll(() => gateway?.stop())

/** A delegating run of alice's on a new thread, given the secret; what a user and the model can read of it. */
const delegate = async (
  text: string,
  secrets: Record<string, string> | null = { ERP_TOKEN: SECRET },
  user: typeof alice = alice
) => {
  const thread = (await user("POST", "/threads", {})).json().thread_id as string
  const before = gateway.scripted.requests.length
  const stream = await user("POST", `/threads/${thread}/runs/stream`, {
    assistant_id: "lead_agent",
    input: Support.userInput(text),
    context: { ...(secrets === null ? {} : { secrets }), subagent_enabled: true },
    stream_mode: ["values", "messages-tuple", "custom"]
  })
  assert.strictEqual(stream.status, 200, stream.text)
  // (the model's requests since the run started: other runs' too when runs go at once)
  const requests = gateway.scripted.requests.slice(before)
  const runId = (await user("GET", `/threads/${thread}/runs`)).json()[0].run_id as string
  const record = await user("GET", `/threads/${thread}/runs/${runId}`)
  const events = await user("GET", `/api/threads/${thread}/runs/${runId}/events`)
  const state = (await user("GET", `/threads/${thread}/state`)).json()
  const task = (state.values.messages as ReadonlyArray<any>).find((m) => m.type === "tool" && m.name === "task")
  const sub = requests.filter(isSubagent)
  assert.isAbove(sub.length, 0, "the subagent ran")
  // what the subagent's command printed, as its model was sent it (masked)
  const printed = contentText(toolMessages(sub.at(-1)!).at(-1)!.content as never)
  const readable = [stream.text, record.text, events.text, JSON.stringify(state), JSON.stringify(requests)]
  return {
    printed,
    task: String(task?.content ?? ""),
    taskId: String(task?.tool_call_id),
    stream: stream.text,
    events: events.text,
    readable
  }
}

const assertBound = (seen: Awaited<ReturnType<typeof delegate>>) => {
  // the subagent's command got it (its reverse came back) in the sandbox, the value itself masked
  assert.include(seen.printed, reversed(SECRET))
  assert.include(seen.printed, "token:[[redacted]]")
  assert.include(seen.printed, "sandbox:[sandbox]")
  // its answer reached the parent's thread, masked
  assert.include(seen.task, reversed(SECRET))
  for (const text of seen.readable) assert.notInclude(text, SECRET)
}

const assertUnbound = (seen: Awaited<ReturnType<typeof delegate>>) => {
  assert.include(seen.printed, "token:[]")
  assert.notInclude(seen.printed, reversed(SECRET))
  for (const text of seen.readable) assert.notInclude(text, SECRET)
}

describe("a subagent running a skill's script gets the skill's request secrets", () => {
  it("of a skill the user slash-activated in the lead's run; nothing readable holds the value", async () => {
    const seen = await delegate("/erp-report pull the numbers")
    assertBound(seen)
    // the subagent's messages were streamed (task_running), masked
    assert.include(seen.stream, "task_running")
    // the subagent's binding is audited as the lead's is, with its task's id: names, never a value
    const audits = JSON.parse(seen.events).filter((e: any) => e.event_type === "middleware:skill_secrets")
    const changes = { skills: ["erp-report"], secrets: ["ERP_TOKEN"], missing: {} }
    assert.deepStrictEqual(audits.map((e: any) => e.content.changes), [changes, { ...changes, task_id: seen.taskId }])
  }, SLOW)

  it("of a skill the lead loaded before delegating, and of one the subagent loads itself", async () => {
    assertBound(await delegate("load erp-report then pull the numbers"))
    assertBound(await delegate("pull the numbers task: read erp-report, then run its script"))
  }, SLOW)

  it("none when the run's skills need none, or the subagent's type may not use the skill, or no secret was given",
    async () => {
    assertUnbound(await delegate("pull the numbers"))
    assertUnbound(await delegate("/erp-report pull the numbers via outsider"))
    const without = await delegate("/erp-report pull the numbers", null)
    assert.include(without.printed, "token:[]")
  }, SLOW)

  it("a secrets-autonomous: false skill binds for the subagent only when the user asked for it", async () => {
    // loaded by the lead model, or slash-activated by the lead model in the subagent's task: none
    assertUnbound(await delegate("load sealed-report then pull the numbers"))
    assertUnbound(await delegate("pull the numbers task: /sealed-report run its script"))
    // slash-activated by the user: the subagent gets it, as the lead does
    assertBound(await delegate("/sealed-report pull the numbers"))
  }, SLOW)

  it("two users' subagents running the skill at once each get their own user's secret, never the other's", async () => {
    const [a, b] = await Promise.all([
      delegate("/erp-report pull the numbers", { ERP_TOKEN: SECRET }, alice),
      delegate("/erp-report pull the numbers", { ERP_TOKEN: BOB_SECRET }, bob)
    ])
    // (each user's thread holds its own subagent's answer: the task result in its thread)
    assert.include(a.task, reversed(SECRET))
    assert.notInclude(a.task, reversed(BOB_SECRET))
    assert.include(b.task, reversed(BOB_SECRET))
    assert.notInclude(b.task, reversed(SECRET))
    for (const text of [...a.readable, ...b.readable]) {
      assert.notInclude(text, SECRET)
      assert.notInclude(text, BOB_SECRET)
    }
  }, SLOW)
})
