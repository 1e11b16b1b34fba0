/**
 * DeerFlow test_acp_config.py (`test_app_config_reload_without_acp_agents_clears_previous_state`): an edit of
 * `config.yaml` that removes `acp_agents` leaves the next run without ACP agents. Through the real gateway, its
 * config file in a temp directory and the scripted model behind the real openai client: the first run's model is
 * offered `invoke_acp_agent` and told about the agents; after the edit, the next run's model is offered neither.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Yaml from "yaml"
import * as Support from "./support.js"

describe("config.yaml's acp_agents edited while the gateway runs", () => {
  it("removing acp_agents takes invoke_acp_agent and the agents' prompt section from the next run", async () => {
    const dir = Support.tempDir("antler-gw-reload-acp-")
    const file = Path.join(dir, "config.yaml")
    const acp_agents = { codex: { command: "codex-acp", description: "Codex, for refactors across many files" } }
    const gateway = await Support.start({ script: () => "Hello.", file, reload: true, config: { acp_agents } })
    const requestOf = () => Support.firstRequestOf(gateway)
    try {
      const withAgents = await requestOf()
      assert.include(withAgents.tools, "invoke_acp_agent")
      assert.include(withAgents.system, "/mnt/acp-workspace")
      Fs.writeFileSync(file, Yaml.stringify(Support.baseConfig(gateway.scripted.url)))
      const without = await requestOf()
      assert.notInclude(without.tools, "invoke_acp_agent")
      assert.notInclude(without.system, "/mnt/acp-workspace")
      assert.notInclude(without.system, "Codex, for refactors")
    } finally {
      await gateway.stop()
    }
  }, 60_000)
})
