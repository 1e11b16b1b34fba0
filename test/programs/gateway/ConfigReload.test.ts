/**
 * DeerFlow test_gateway_config_freshness.py (issue 3107: an edit of `config.yaml` is seen by the next request and
 * run without a restart) through the real gateway, its config file in a temp directory and the scripted model
 * behind the real openai client: the next run uses the edited default model, a model the edit adds is listed and
 * may be asked for, and an edit that does not decode is refused with one warning while the runs go on with the
 * last good configuration.
 */
import { Client } from "@langchain/langgraph-sdk"
import { assert, describe, it } from "@effect/vitest"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Yaml from "yaml"
import { captureLogs } from "../../support/logs.js"
import * as Support from "./support.js"

const human = (content: string) => ({ messages: [{ role: "user", content }] })

const model = (name: string, url: string) => ({
  name,
  model: `model-${name}`,
  base_url: url,
  api_key: "sk-test-scripted-key-000000"
})

describe("config.yaml edited while the gateway runs", () => {
  it("the next run uses the edit; a broken edit is refused once and the last good one stays in use", async () => {
    const { capture, logged } = captureLogs()
    const file = Path.join(Support.tempDir("antler-gw-reload-"), "config.yaml")
    const gateway = await Support.start({
      script: () => "Hello.",
      file,
      reload: true,
      logger: capture,
      config: (url) => ({ models: [model("first", url), model("second", url)] })
    })
    try {
      const { url } = gateway.scripted
      const client = new Client({ apiUrl: gateway.url })
      const thread = await client.threads.create()
      // the model the first call of a run went to
      const runWith = async (content: string, config?: Record<string, unknown>) => {
        const before = gateway.scripted.requests.length
        await client.runs.wait(thread.thread_id, "lead_agent", {
          input: human(content),
          ...(config !== undefined ? { config: { configurable: config } } : {})
        })
        return gateway.scripted.requests[before]!.model
      }
      const modelNames = async () =>
        ((await (await fetch(`${gateway.url}/api/models`)).json()) as any).models.map((m: any) => m.name)
      const write = (more: Record<string, unknown>) =>
        Fs.writeFileSync(file, Yaml.stringify({ ...Support.baseConfig(url), ...more }))

      assert.strictEqual(await runWith("one"), "model-first")
      assert.strictEqual(
        await Support.statusOf(client.runs.wait(thread.thread_id, "lead_agent", {
          input: human("x"),
          config: { configurable: { model_name: "third" } }
        })),
        400,
        "a model no configuration names is refused"
      )

      write({ models: [model("second", url), model("first", url), model("third", url)] })
      assert.strictEqual(await runWith("two"), "model-second", "the edited default model")
      assert.deepStrictEqual(await modelNames(), ["second", "first", "third"])
      assert.strictEqual(await runWith("three", { model_name: "third" }), "model-third", "a model the edit added")
      assert.isTrue(logged.some((line) => line === `${file} changed: the runs started from now on use it`))

      Fs.writeFileSync(file, "models: [ { name: broken\n")
      assert.strictEqual(await runWith("four"), "model-second", "the last good configuration")
      assert.strictEqual(await runWith("five"), "model-second")
      assert.deepStrictEqual(await modelNames(), ["second", "first", "third"])
      const refused = logged.filter((line) => line.includes("changed but was not taken"))
      assert.lengthOf(refused, 1, logged.join("\n"))
      assert.include(refused[0]!, `${file} changed but was not taken; runs go on with the configuration taken before`)
      assert.include(refused[0]!, "YAML syntax error")

      write({ models: [model("first", url)] })
      assert.strictEqual(await runWith("six"), "model-first", "fixed: taken")
      assert.deepStrictEqual(await modelNames(), ["first"])
    } finally {
      await gateway.stop()
    }
  }, 60_000)
})
