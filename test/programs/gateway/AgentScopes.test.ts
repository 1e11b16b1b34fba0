/**
 * The agents a gateway built over an earlier `config.yaml` are released once no run uses them: through the real
 * gateway taking edits of its config file (in a temp directory), with the scripted model behind the real openai
 * client. A configured middleware (test/fixtures/configured-middlewares/lifecycle.mjs) opens a resource of its own
 * with each chain built and closes it with the agent's scope, and can hold a run at its first model call. While
 * one run is held, the file is edited three times with a run after each: the agents replaced are closed, the held
 * run's is not; the held run then completes normally, and its agent is closed with its end.
 */
import { Client } from "@langchain/langgraph-sdk"
import { assert, describe, it } from "@effect/vitest"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"
import * as Yaml from "yaml"
import { until } from "../../support/poll.js"
import * as Support from "./support.js"

const HERE = Path.dirname(fileURLToPath(import.meta.url))
const FIXTURE = pathToFileURL(Path.resolve(HERE, "../../fixtures/configured-middlewares/lifecycle.mjs")).href

const human = (content: string) => ({ messages: [{ role: "user", content }] })

describe("agents of an earlier configuration", () => {
  it("are released once no run uses them; a run under way keeps its agent and completes", async () => {
    const dir = Support.tempDir("antler-gw-agent-scopes-")
    const file = Path.join(dir, "config.yaml")
    const log = Path.join(dir, "chains.log")
    const gate = Path.join(dir, "gate")
    // the configured middlewares, with this test's log and gate (a module beside the config file)
    Fs.writeFileSync(
      Path.join(dir, "chains.mjs"),
      `import { chains } from ${JSON.stringify(FIXTURE)}\n` +
        `export const { Tracked, Hold } = chains(${JSON.stringify(log)}, ${JSON.stringify(gate)})\n`
    )
    const extensions = { middlewares: ["./chains.mjs:Tracked", "./chains.mjs:Hold"] }
    const gateway = await Support.start({ script: () => "Hello.", file, reload: true, config: { extensions } })
    const lines = () => (Fs.existsSync(log) ? Fs.readFileSync(log, "utf8").split("\n") : [])
    const chainsSaying = (word: string) =>
      lines().filter((line) => line.startsWith(`${word} `)).map((line) => Number(line.slice(word.length + 1)))
    const open = () => {
      const closed = chainsSaying("close")
      return chainsSaying("open").filter((n) => !closed.includes(n)).sort((a, b) => a - b)
    }
    try {
      const client = new Client({ apiUrl: gateway.url })
      const heldThread = await client.threads.create()
      const held = await client.runs.create(heldThread.thread_id, "lead_agent", { input: human("hold on, please") })
      await until(() => chainsSaying("waiting").length === 1, () => `the run held:\n${lines().join("\n")}`)
      const [heldChain] = chainsSaying("waiting")

      const other = await client.threads.create()
      const { url } = gateway.scripted
      for (const name of ["second", "third-model", "fourth-model-name"]) {
        Fs.writeFileSync(file, Yaml.stringify({
          ...Support.baseConfig(url),
          extensions,
          models: [{ name, model: `model-${name}`, base_url: url, api_key: "sk-test-scripted-key-000000" }]
        }))
        const before = gateway.scripted.requests.length
        await client.runs.wait(other.thread_id, "lead_agent", { input: human(`after the edit to ${name}`) })
        assert.strictEqual(gateway.scripted.requests[before]!.model, `model-${name}`, "the run after the edit")
      }
      const current = Math.max(...chainsSaying("open"))
      assert.isAtLeast(current, heldChain! + 3, "an agent built for each edit")
      assert.deepStrictEqual(
        open(),
        [heldChain, current],
        `only the held run's agent and the current one are open:\n${lines().join("\n")}`
      )

      Fs.writeFileSync(gate, "")
      await client.runs.join(heldThread.thread_id, held.run_id)
      assert.strictEqual((await client.runs.get(heldThread.thread_id, held.run_id)).status, "success")
      const state = await client.threads.getState(heldThread.thread_id)
      assert.strictEqual((state.values as any).messages.at(-1).content, "Hello.")
      assert.deepStrictEqual(open(), [current], `the held run's agent closed with its end:\n${lines().join("\n")}`)
    } finally {
      Fs.writeFileSync(gate, "")
      await gateway.stop()
    }
    assert.deepStrictEqual(open(), [], "the current agent closed with the gateway")
  }, 60_000)
})
