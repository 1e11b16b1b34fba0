/**
 * Attack round 30 on an ACP agent's words (`invoke_acp_agent`) and the secrets that are not its own: its answer, cut at
 * the tool's bound, and a failed agent's stderr tail, cut at 300, were masked before the cut for the agents' `env`
 * values only. An agent saying back one of the process's own secrets (a configured model's key, in a file Antler's
 * user can read: the agent runs as that user) or the run's request secret where a cut fell had its beginning read by
 * the model, streamed, kept and logged, where the masks of whole values after the cut find nothing.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import { fileURLToPath } from "node:url"
import * as AcpTool from "../../src/layers/AcpTool.js"
import { AcpAgentsConfig } from "../../src/services/AppConfig.js"
import { ProcessSecrets } from "../../src/services/ProcessSecrets.js"
import * as M from "../../src/state/Message.js"
import * as Redact from "../../src/state/Redact.js"
import { tempDirs } from "../support/fixtures.js"
import * as H from "../support/harness.js"
import { captureLogs } from "../support/logs.js"

const AGENT = fileURLToPath(new URL("../fixtures/acp-agent.mjs", import.meta.url))
const tempDir = tempDirs()

// (a configured model's key: one of the process's secrets, not an ACP agent's env value)
const KEY = "sk-proc-a30-acp-0123456789abcdefghij"
// (the run's request secret)
const TOKEN = "erp-token-a30-acp-0123456789abcdef"

/** An agent `name` run by `args` (its env holds a value of its own), and the tool over it. */
const toolOver = (args: ReadonlyArray<string>, maxAnswerChars?: number) =>
  AcpTool.make({
    agents: Schema.decodeUnknownSync(AcpAgentsConfig)({
      coder: { command: process.execPath, args, description: "Coder", env: { AGENT_KEY: "agent-own-key-0123456789" } }
    }),
    home: tempDir("antler-acp-a30-"),
    maxAnswerChars
  })

/** A run whose model invokes the agent once, with the process's key known and `TOKEN` as a request secret. */
const invoked = (args: ReadonlyArray<string>, maxAnswerChars?: number) =>
  Effect.gen(function*() {
    const tool = yield* toolOver(args, maxAnswerChars)
    const { capture, logged } = captureLogs()
    const o = yield* H.run({
      input: "ask the coder",
      threadId: "t-acp-a30",
      userId: "u-acp-a30",
      tools: [tool],
      options: { secrets: Redacted.make(new Map([["ERP_TOKEN", TOKEN]])) },
      script: [{ toolCalls: [{ name: AcpTool.NAME, args: { agent: "coder", prompt: "go" } }] }, "Done."]
    }).pipe(Effect.provide(capture))
    const [result] = o.state.messages.filter((m) => m.type === "tool").map(M.text)
    return { o, result: result ?? "", logged }
  }).pipe(Effect.provideService(ProcessSecrets, Redact.make([KEY])), H.withStore)

const unseen = (seen: { o: H.Outcome; logged: ReadonlyArray<string> }, start: string) => {
  assert.notInclude(JSON.stringify(seen.o.requests), start, "what the model read")
  assert.notInclude(JSON.stringify(seen.o.events), start, "what is streamed")
  assert.notInclude(JSON.stringify(seen.o.state), start, "what is kept")
  assert.notInclude(seen.logged.join("\n"), start, "what is logged")
}

describe("Attack30: an ACP agent's words cut inside a secret that is not its own", () => {
  it.live("an answer cut inside the process's key: the model reads the answer, none of the key", () =>
    Effect.gen(function*() {
      // ("key: " and 12 characters of the key)
      const seen = yield* invoked([AGENT, "say", `key: ${KEY} rest`], 17)
      assert.include(seen.result, "key: ", "the model reads the answer")
      assert.include(seen.result, "[The answer was cut at 17 characters.]")
      unseen(seen, KEY.slice(0, 8))
    }))

  it.live("an answer cut inside the run's request secret: none of it", () =>
    Effect.gen(function*() {
      const seen = yield* invoked([AGENT, "say", `token: ${TOKEN} rest`], 19)
      assert.include(seen.result, "token: ", "the model reads the answer")
      assert.include(seen.result, "[The answer was cut at 19 characters.]")
      unseen(seen, TOKEN.slice(0, 8))
    }))

  it.live("a failed agent's stderr cut inside the process's key: the model reads the stderr, none of the key", () =>
    Effect.gen(function*() {
      // (a login refused, the key said back 290 characters in: the tail shown is cut at 300)
      const said = `process.stderr.write('login refused: ' + 'x'.repeat(274) + ${JSON.stringify(KEY)} + ' is not ` +
        "valid'); process.exit(1)"
      const seen = yield* invoked(["-e", said])
      assert.include(seen.result, "login refused: xxx", "the model reads the agent's stderr")
      unseen(seen, KEY.slice(0, 8))
    }))
})
