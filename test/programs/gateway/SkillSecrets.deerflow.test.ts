/**
 * DeerFlow's request-scoped secrets for skills (`test_skill_request_scoped_secrets.py`), end to end through the
 * gateway: a run's `context.secrets` reach the `bash` commands of the skill in use that declares them
 * (`required-secrets`), as environment variables of the real local sandbox, and nothing a user or the model reads
 * holds a value: the tool result (the model's next request, the thread), the streamed events, the run's events and
 * its Run object. Two token users running the same skill at once each get their own value only. A malformed carrier
 * is a 422 naming the field.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Fs from "node:fs"
import * as Path from "node:path"
import type { ChatRequestBody, Turn } from "../../../src/layers/ScriptedChatServer.js"
import * as Either from "effect/Either"
import * as RunSettings from "../../../src/programs/gateway/RunSettings.js"
import * as Requests from "../../support/requests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const ALICE_SECRET = "sk-erp-alice-9f3c-DO-NOT-LEAK"
const BOB_SECRET = "sk-erp-bob-77aa-DO-NOT-LEAK"

const reversed = (text: string) => [...text].reverse().join("")

// (the value reversed is what proves the command got it: only the value itself is masked)
// (and a file it writes in the workspace, whose diff the run's workspace_changes event carries)
const COMMAND = "echo \"token:[$ERP_TOKEN]\"; printf '%s' \"$ERP_TOKEN\" | rev; echo; " +
  "echo \"host:[$OPENAI_API_KEY]\"; printf 'report for %s\\n' \"$ERP_TOKEN\" > report.txt"

const toolMessages = (body: ChatRequestBody) => body.messages.filter((m) => m.role === "tool")

/**
 * `/erp-report` and `/sealed-report` (slash): bash at once. "load <name>": read its SKILL.md first (the thread then
 * has it in `skill_context`), then bash. After the bash result: the answer.
 */
const script = (body: ChatRequestBody): Turn => {
  const text = Support.lastUserText(body)
  const tools = toolMessages(body)
  const bash = { toolCalls: [{ name: "bash", arguments: { description: "pull the report", command: COMMAND } }] }
  const loading = /load ([a-z-]+)/.exec(text)
  if (loading !== null) {
    if (tools.length === 0) {
      const path = `/mnt/skills/custom/${loading[1]}/SKILL.md`
      return { toolCalls: [{ name: "read_file", arguments: { description: "read the skill", path } }] }
    }
    return tools.length === 1 ? bash : "Report pulled."
  }
  return tools.length === 0 ? bash : "Report pulled."
}

const skill = (name: string, extra = "") =>
  `---\nname: ${name}\ndescription: Pull a report from the ERP\nrequired-secrets:\n  - ERP_TOKEN\n` +
  `  - name: ERP_REGION\n    optional: true\n${extra}---\n# ${name}\n\nRun the report script.\n`

let gateway: TestGateway
let dir = ""
const alice = Requests.as(() => gateway, Support.ALICE)
const bob = Requests.as(() => gateway, Support.BOB)

beforeAll(async () => {
  dir = Support.tempDir("antler-skill-secrets-")
  for (const [name, extra] of [["erp-report", ""], ["sealed-report", "secrets-autonomous: false\n"]] as const) {
    Fs.mkdirSync(Path.join(dir, "skills", "custom", name), { recursive: true })
    Fs.writeFileSync(Path.join(dir, "skills", "custom", name, "SKILL.md"), skill(name, extra))
  }
  gateway = await Support.start({
    script,
    source: Path.join(dir, "config.yaml"),
    config: { gateway: Support.twoUsers, sandbox: { allow_host_bash: true } }
  })
})
afterAll(() => gateway?.stop())

/** A run of `text` on a new thread of `user`'s, with `context`, streamed; what a user can read of it afterwards. */
const run = async (user: typeof alice, thread: string, text: string, context: Record<string, unknown>) => {
  assert.strictEqual((await user("POST", "/threads", { thread_id: thread })).status, 200)
  const stream = await user("POST", `/threads/${thread}/runs/stream`, {
    assistant_id: "lead_agent",
    input: Support.userInput(text),
    context,
    stream_mode: ["values", "messages-tuple", "custom"]
  })
  assert.strictEqual(stream.status, 200, stream.text)
  const runId = (await user("GET", `/threads/${thread}/runs`)).json()[0].run_id as string
  const record = await user("GET", `/threads/${thread}/runs/${runId}`)
  const events = await user("GET", `/api/threads/${thread}/runs/${runId}/events`)
  const state = (await user("GET", `/threads/${thread}/state`)).json()
  const tool = (state.values.messages as ReadonlyArray<any>).filter((m) => m.type === "tool").at(-1)
  return { stream: stream.text, record: record.text, events: events.text, state: JSON.stringify(state), tool }
}

/** The model's requests that answered a bash result of `thread`'s command. */
const modelSaw = (secret: string) =>
  gateway.scripted.requests.filter((body) => JSON.stringify(body).includes(reversed(secret)))

describe("request-scoped secrets for skills, through the gateway", () => {
  it("a slash-activated skill's bash command gets its secret; nothing readable holds the value", async () => {
    const seen = await run(alice, "alice-slash", "/erp-report pull the numbers", {
      secrets: { ERP_TOKEN: ALICE_SECRET, UNUSED_TOKEN: "sk-never-declared-000000" }
    })
    // the command got it (its reverse comes back), the value itself is masked, the host's key is not there
    const output = String(seen.tool.content)
    assert.include(output, reversed(ALICE_SECRET))
    assert.include(output, "token:[[redacted]]")
    assert.include(output, "host:[]")
    for (const text of [seen.stream, seen.record, seen.events, seen.state]) {
      assert.notInclude(text, ALICE_SECRET)
      assert.notInclude(text, "sk-never-declared-000000")
    }
    // the streamed output as it came (tool_output) is masked too
    assert.include(seen.stream, "tool_output")
    // the model was sent the masked result
    const asked = modelSaw(ALICE_SECRET)
    assert.isAbove(asked.length, 0)
    for (const body of asked) assert.notInclude(JSON.stringify(body), ALICE_SECRET)
    // the workspace diff of the file the command wrote is in the run's events, the value masked
    const changes = JSON.parse(seen.events).find((e: any) => e.event_type === "workspace_changes")
    assert.include(JSON.stringify(changes), "report for [redacted]")
    // the audit names the skill and the secret, never its value
    const audit = JSON.parse(seen.events).find((e: any) => e.event_type === "middleware:skill_secrets")
    assert.deepStrictEqual(audit.content.changes, { skills: ["erp-report"], secrets: ["ERP_TOKEN"], missing: {} })
  })

  it("two users running the skill at once each get their own secret, never the other's", async () => {
    const [a, b] = await Promise.all([
      run(alice, "alice-both", "/erp-report pull", { secrets: { ERP_TOKEN: ALICE_SECRET } }),
      run(bob, "bob-both", "/erp-report pull", { secrets: { ERP_TOKEN: BOB_SECRET } })
    ])
    assert.include(String(a.tool.content), reversed(ALICE_SECRET))
    assert.notInclude(String(a.tool.content), reversed(BOB_SECRET))
    assert.include(String(b.tool.content), reversed(BOB_SECRET))
    assert.notInclude(String(b.tool.content), reversed(ALICE_SECRET))
    for (const text of [a.stream, a.events, a.state, b.stream, b.events, b.state]) {
      assert.notInclude(text, ALICE_SECRET)
      assert.notInclude(text, BOB_SECRET)
    }
    // and a run of bob's without secrets gets none, whatever alice's runs were given
    const none = await run(bob, "bob-none", "/erp-report pull", {})
    assert.include(String(none.tool.content), "token:[]")
  })

  it("a skill the model loaded binds without a slash; one marked secrets-autonomous: false does not", async () => {
    const loaded = await run(alice, "alice-loaded", "load erp-report and pull", {
      secrets: { ERP_TOKEN: ALICE_SECRET }
    })
    assert.include(String(loaded.tool.content), reversed(ALICE_SECRET))
    assert.notInclude(loaded.state, ALICE_SECRET)
    const sealed = await run(alice, "alice-sealed", "load sealed-report and pull", {
      secrets: { ERP_TOKEN: ALICE_SECRET }
    })
    assert.include(String(sealed.tool.content), "token:[]")
    // activated with a slash, the same skill gets it
    const slashed = await run(alice, "alice-sealed-slash", "/sealed-report pull", {
      secrets: { ERP_TOKEN: ALICE_SECRET }
    })
    assert.include(String(slashed.tool.content), reversed(ALICE_SECRET))
  })

  it("a run without the skill in use gets no secret", async () => {
    const seen = await run(alice, "alice-plain", "just run the command", { secrets: { ERP_TOKEN: ALICE_SECRET } })
    assert.include(String(seen.tool.content), "token:[]")
    assert.notInclude(seen.events, "middleware:skill_secrets")
  })

  it("config.context.secrets wins over context.secrets, as the config's context wins", async () => {
    assert.strictEqual((await alice("POST", "/threads", { thread_id: "alice-config" })).status, 200)
    const answer = await alice("POST", "/threads/alice-config/runs/wait", {
      assistant_id: "lead_agent",
      input: Support.userInput("/erp-report pull"),
      context: { secrets: { ERP_TOKEN: BOB_SECRET } },
      config: { context: { secrets: { ERP_TOKEN: ALICE_SECRET } } }
    })
    assert.strictEqual(answer.status, 200, answer.text)
    const state = (await alice("GET", "/threads/alice-config/state")).json()
    const tool = (state.values.messages as ReadonlyArray<any>).filter((m) => m.type === "tool").at(-1)
    assert.include(String(tool.content), reversed(ALICE_SECRET))
    assert.notInclude(answer.text, ALICE_SECRET)
  })

  it("a malformed carrier is refused with 422 naming the field, the value never repeated", async () => {
    assert.strictEqual((await alice("POST", "/threads", { thread_id: "alice-refused" })).status, 200)
    const cases: ReadonlyArray<readonly [unknown, string]> = [
      ["sk-a-string-not-a-mapping", "context.secrets must be a mapping"],
      [{ "bad name!": "sk-value-0000000000" }, "is not a valid secret name"],
      [{ ERP_TOKEN: 1234567890 }, "context.secrets.ERP_TOKEN must be text"],
      [{ ERP_TOKEN: "sk-with\u0000nul-000000" }, "context.secrets.ERP_TOKEN holds a NUL character"],
      [{ ERP_TOKEN: "x".repeat(16 * 1024 + 1) }, "is longer than 16384 characters"],
      [Object.fromEntries(Array.from({ length: 65 }, (_, i) => [`S_${i}`, "v"])), "at most 64 are accepted"]
    ]
    for (const [secrets, expected] of cases) {
      const answer = await alice("POST", "/threads/alice-refused/runs", {
        assistant_id: "lead_agent",
        input: Support.userInput("/erp-report pull"),
        context: { secrets }
      })
      assert.strictEqual(answer.status, 422, answer.text)
      assert.include(answer.text, expected)
      assert.notInclude(answer.text, "sk-value-0000000000")
    }
    assert.deepStrictEqual((await alice("GET", "/threads/alice-refused/runs")).json(), [])
  })
})

describe("request-scoped secrets in a cluster", () => {
  it("are refused (a run's request waits in PostgreSQL and travels between runners); none is fine", () => {
    const refused = RunSettings.requestSecrets({ context: { secrets: { ERP_TOKEN: ALICE_SECRET } } }, true)
    assert.isTrue(Either.isLeft(refused))
    if (Either.isLeft(refused)) {
      assert.strictEqual(refused.left.reason, "unprocessable")
      assert.include(refused.left.message, "context.secrets is not accepted by a gateway running as a cluster")
      assert.notInclude(refused.left.message, ALICE_SECRET)
    }
    assert.deepStrictEqual(RunSettings.requestSecrets({ context: { model_name: "m" } }, true), Either.right(undefined))
    const alone = RunSettings.requestSecrets({ config: { context: { secrets: { ERP_TOKEN: ALICE_SECRET } } } }, false)
    assert.isTrue(Either.isRight(alone) && alone.right !== undefined)
  })
})
