/**
 * Attack round 27 on an ACP agent's stderr (`invoke_acp_agent`): a failed agent's error adds its stderr's tail, cut to
 * 300 characters, and only then are the agents' `env` values masked (whole). An agent saying its key back on stderr
 * (a refused login) where the cut fell had the key's beginning read by the model.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as AcpTool from "../../src/layers/AcpTool.js"
import { AcpAgentsConfig } from "../../src/services/AppConfig.js"
import * as Tool from "../../src/services/Tool.js"
import * as M from "../../src/state/Message.js"
import { inRun, tempDirs } from "../support/fixtures.js"

const tempDir = tempDirs()
const KEY = "sk-agent-a27-0123456789abcdefghij"

describe("Attack27: an ACP agent's stderr cut inside its key", () => {
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
})
