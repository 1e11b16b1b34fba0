/**
 * A secret of a guard's module configuration (`guardrails.provider.config`, a `safety_finish_reason.detectors`
 * entry's `config`: a remote policy service's `api_key`) in what the module says when it fails: the guard puts a
 * failing provider's words in the tool's result, which the model reads and the user is streamed, answered and
 * stored. A gateway user whose run makes the provider fail must not learn the operator's key. The model is
 * SCRIPTED (it calls `ls`, then repeats what the tool answered); the provider is a real module beside config.yaml.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Schema from "effect/Schema"
import type { ChatRequestBody, Turn } from "../../../src/layers/ScriptedChatServer.js"
import * as App from "../../../src/programs/App.js"
import { AppConfigSchema } from "../../../src/services/AppConfig.js"
import { messageText } from "../../support/modelRequests.js"
import type { TestGateway } from "./support.js"
import { captureLogs } from "../../support/logs.js"
import * as Support from "./support.js"

const PROVIDER_KEY = "pk-guard-policy-0123456789abcdef"
const DETECTOR_TOKEN = "dt-detector-token-0123456789ab"

const MODULE = `
export class LeakyProvider {
  constructor(config) { this.key = config.api_key }
  evaluate() { throw new Error("the policy service refused key " + this.key) }
}
export class Detector {
  constructor(config) { this.token = config.settings.access_token }
  detect() { return null }
}
`

const script = (body: ChatRequestBody): Turn => {
  const results = body.messages.filter((m) => m.role === "tool")
  return results.length === 0
    ? { toolCalls: [{ id: "l1", name: "ls", arguments: { description: "list", path: "/mnt/user-data/workspace" } }] }
    : `The tool said: ${results.map(messageText).join(" | ")}`
}

let gateway: TestGateway
let dir: string
const logs = captureLogs("Warning")

beforeAll(async () => {
  dir = Support.tempDir("antler-guard-secrets-")
  Fs.writeFileSync(Path.join(dir, "guards.mjs"), MODULE)
  gateway = await Support.start({
    script,
    source: Path.join(dir, "config.yaml"),
    config: {
      gateway: Support.twoUsers,
      guardrails: {
        enabled: true,
        fail_closed: true,
        provider: { use: "./guards.mjs:LeakyProvider", config: { api_key: PROVIDER_KEY } }
      },
      safety_finish_reason: {
        detectors: [{ use: "./guards.mjs:Detector", config: { settings: { access_token: DETECTOR_TOKEN } } }]
      }
    },
    logger: logs.capture
  })
})
afterAll(() => gateway?.stop())

const call = (method: string, path: string, body?: unknown) =>
  fetch(`${gateway.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${Support.BOB}`, "content-type": "application/json" },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {})
  })

describe("a guard's configured secret", () => {
  it("is in nothing the model reads, streamed or kept: the refusal gives DeerFlow's reason", async () => {
    const thread = (await (await call("POST", "/threads", {})).json()) as { thread_id: string }
    const streamed = await (await call("POST", `/threads/${thread.thread_id}/runs/stream`, {
      assistant_id: "lead_agent",
      input: Support.userInput("list my files"),
      stream_mode: ["values", "messages-tuple"]
    })).text()
    // the provider failed, so the call was refused with DeerFlow's reason: the provider's own words are logged only
    assert.include(streamed, "guardrail provider error (fail-closed)")
    const state = await (await call("GET", `/threads/${thread.thread_id}/state`)).text()
    const runs = (await (await call("GET", `/threads/${thread.thread_id}/runs`)).json()) as Array<{ run_id: string }>
    const events = await (await call("GET", `/api/threads/${thread.thread_id}/runs/${runs[0]!.run_id}/events`)).text()
    // (the operator's log has them: `antler serve` masks what it prints with the configuration's secrets, the
    // provider's key among them, see the next test)
    assert.include(logs.logged.join("\n"), "the policy service refused key")
    for (const [what, text] of [["stream", streamed], ["state", state], ["events", events]] as const) {
      assert.notInclude(text, PROVIDER_KEY, what)
      assert.notInclude(text, "the policy service refused", what)
    }
  })

  it("of a detector's config too: every secret-named value of the guards' configs is one the redactor knows", () => {
    const config = Schema.decodeUnknownSync(AppConfigSchema)({
      guardrails: { provider: { use: "./guards.mjs:LeakyProvider", config: { api_key: PROVIDER_KEY, url: "u" } } },
      safety_finish_reason: {
        detectors: [{ use: "./guards.mjs:Detector", config: { settings: { access_token: DETECTOR_TOKEN } } }]
      }
    })
    assert.deepStrictEqual(App.configSecrets(config), [PROVIDER_KEY, DETECTOR_TOKEN])
  })
})
