/**
 * Attack round 27 on an ACP agent's words (`invoke_acp_agent`): a failed agent's error adds its stderr's tail, cut to
 * 300 characters, and its answer is cut at the tool's bound; only then were the agents' `env` values masked (whole).
 * An agent saying its key back on stderr (a refused login) or in its answer where a cut fell had the key's beginning
 * read by the model.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { fileURLToPath } from "node:url"
import * as Schema from "effect/Schema"
import * as AcpTool from "../../src/layers/AcpTool.js"
import { AcpAgentsConfig } from "../../src/services/AppConfig.js"
import * as Tool from "../../src/services/Tool.js"
import * as M from "../../src/state/Message.js"
import { inRun, tempDirs } from "../support/fixtures.js"

const AGENT = fileURLToPath(new URL("../fixtures/acp-agent.mjs", import.meta.url))

const tempDir = tempDirs()
const KEY = "sk-agent-a27-0123456789abcdefghij"

describe("Attack27: an ACP agent's words cut inside its key", () => {
  it.live("the model reads the stderr, none of the key", () =>
    Effect.gen(function*() {
      // (a login refused, its key said back 290 characters in: the tail shown is cut at 300)
      const said = "process.stderr.write('login refused: ' + 'x'.repeat(274) + process.env.AGENT_KEY + ' is not " +
        "valid'); process.exit(1)"
      const tool = yield* AcpTool.make({
        agents: Schema.decodeUnknownSync(AcpAgentsConfig)({
          broken: { command: process.execPath, args: ["-e", said], description: "Broken", env: { AGENT_KEY: KEY } }
        }),
        home: tempDir("antler-acp-a27-")
      })
      const call = { id: "c", name: tool.name, args: { agent: "broken", prompt: "go" } }
      const result = yield* Tool.invoke(tool, call).pipe(
        Effect.provide(inRun({ threadId: "t-acp", userId: "u-acp" }).context)
      )
      const text = M.contentText(result.message.content)
      assert.include(text, "login refused: xxx", "the model reads the agent's stderr")
      assert.notInclude(text, KEY.slice(0, 8))
    }))

  it.live("an answer cut inside the key: the model reads the answer, none of the key", () =>
    Effect.gen(function*() {
      const tool = yield* AcpTool.make({
        agents: Schema.decodeUnknownSync(AcpAgentsConfig)({
          keyed: { command: process.execPath, args: [AGENT, "keyed"], description: "Keyed", env: { ACP_TEST_SECRET: KEY } }
        }),
        home: tempDir("antler-acp-a27-"),
        // ("key: " and 12 characters of the key)
        maxAnswerChars: 17
      })
      const call = { id: "c", name: tool.name, args: { agent: "keyed", prompt: "go" } }
      const result = yield* Tool.invoke(tool, call).pipe(
        Effect.provide(inRun({ threadId: "t-acp", userId: "u-acp" }).context)
      )
      const text = M.contentText(result.message.content)
      assert.include(text, "[The answer was cut at 17 characters.]")
      assert.notInclude(text, KEY.slice(0, 8))
    }))
})
