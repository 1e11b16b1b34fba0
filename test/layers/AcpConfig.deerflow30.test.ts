/**
 * DeerFlow's `test_acp_config.py`, through `config.yaml` as Antler reads it (`ConfigFile.fromObject`, the same
 * checks and errors as a file): an agent's defaults (no args, no env, no model, permissions refused, 1800 seconds),
 * what is given kept (args, env, model, approval, timeout), several agents, none; a timeout that is not positive, a
 * missing command or description refused, naming the agent and the key. Clearing on a reload is
 * `AcpReload.deerflow.test.ts`'s; the module-level registry (`get_acp_agents`) is Python's.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as ConfigFile from "../../src/layers/ConfigFile.js"
import { tempDirs } from "../support/fixtures.js"

const tempDir = tempDirs()

const load = (acp_agents: unknown) =>
  ConfigFile.fromObject({ acp_agents }, { home: tempDir("antler-acpcfg-") })

/** What the refusal of `acp_agents` says (its issues, one string). */
const refusal = (acp_agents: unknown) =>
  Effect.map(Effect.flip(load(acp_agents)), (error) => JSON.stringify(error.issues))

describe("test_acp_config.py", () => {
  it.effect("test_acp_agent_config_defaults / test_load_acp_config_sets_agents / ..._timeout_seconds_default", () =>
    Effect.gen(function*() {
      const agents = (yield* load({
        claude_code: { command: "claude-code-acp", description: "Claude Code for coding tasks" }
      })).config.acp_agents
      const agent = agents.claude_code!
      assert.strictEqual(agent.command, "claude-code-acp")
      assert.strictEqual(agent.description, "Claude Code for coding tasks")
      assert.deepStrictEqual(agent.args, [])
      assert.deepStrictEqual(agent.env, {})
      assert.isTrue(agent.model == null)
      assert.strictEqual(agent.auto_approve_permissions, false)
      assert.strictEqual(agent.timeout_seconds, 1800)
    }))

  it.effect("test_load_acp_config_multiple_agents / env literal / model / auto-approve / timeout override", () =>
    Effect.gen(function*() {
      const agents = (yield* load({
        codex: {
          command: "codex-acp",
          args: ["--flag"],
          description: "Codex",
          env: { OPENAI_API_KEY: "sk-test", FOO: "bar" },
          model: "claude-opus-4",
          auto_approve_permissions: true,
          timeout_seconds: 45
        },
        claude_code: { command: "claude-code-acp", description: "Claude Code" }
      })).config.acp_agents
      assert.deepStrictEqual(Object.keys(agents).sort(), ["claude_code", "codex"])
      const codex = agents.codex!
      assert.deepStrictEqual(codex.args, ["--flag"])
      assert.deepStrictEqual(codex.env, { OPENAI_API_KEY: "sk-test", FOO: "bar" })
      assert.strictEqual(codex.model, "claude-opus-4")
      assert.strictEqual(codex.auto_approve_permissions, true)
      assert.strictEqual(codex.timeout_seconds, 45)
    }))

  it.effect("test_load_acp_config_empty_clears_agents / ..._none_clears_agents / returns_empty_by_default", () =>
    Effect.gen(function*() {
      assert.deepStrictEqual((yield* load({})).config.acp_agents, {})
      const none = yield* ConfigFile.fromObject({}, { home: tempDir("antler-acpcfg-") })
      assert.deepStrictEqual(none.config.acp_agents, {})
    }))

  it.effect("test_acp_agent_config_timeout_seconds_rejects_non_positive; a missing command or description", () =>
    Effect.gen(function*() {
      for (const timeout of [0, -1]) {
        const said = yield* refusal({ codex: { command: "codex-acp", description: "d", timeout_seconds: timeout } })
        assert.include(said, "timeout_seconds", said)
      }
      assert.include(yield* refusal({ codex: { description: "d" } }), "command")
      assert.include(yield* refusal({ codex: { command: "codex-acp" } }), "description")
    }))
})
