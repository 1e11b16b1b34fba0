/**
 * DeerFlow test_gateway_config_freshness.py (issue 3107: an edit of `config.yaml` is seen by the next request and
 * run without a restart) through the real gateway, its config file in a temp directory and the scripted model
 * behind the real openai client: the next run uses the edited default model, a model the edit adds is listed and
 * may be asked for, and an edit that does not decode is refused with one warning while the runs go on with the
 * last good configuration. Then `antler serve` itself (the bundle, a child process), which looks at the file at
 * most every 2 s: the runs are repeated until one goes to the edited model.
 */
import { Client } from "@langchain/langgraph-sdk"
import { afterAll, assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Scope from "effect/Scope"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Yaml from "yaml"
import * as ScriptedChatServer from "../../../src/layers/ScriptedChatServer.js"
import { serveProcess, type ServeProcess } from "../../support/cli.js"
import { captureLogs } from "../../support/logs.js"
import { eventually, until } from "../../support/poll.js"
import * as Support from "./support.js"

const human = Support.userInput
const model = Support.scriptedModel

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
      const cronWith = (model: string) =>
        Support.statusOf(client.crons.createForThread(thread.thread_id, "lead_agent", {
          schedule: "0 0 1 1 *",
          input: human("yearly"),
          config: { configurable: { model_name: model } }
        }))
      assert.strictEqual(await cronWith("third"), 422)

      write({ models: [model("second", url), model("first", url), model("third", url)] })
      assert.strictEqual(await runWith("two"), "model-second", "the edited default model")
      // the streamed messages name it too
      const named = new Set<string>()
      for await (const part of client.runs.stream(thread.thread_id, "lead_agent", {
        input: human("two again"),
        streamMode: ["messages-tuple"]
      })) {
        if (part.event === "messages") named.add((part.data as any)[1]?.ls_model_name)
      }
      assert.deepStrictEqual([...named], ["second"])
      assert.deepStrictEqual(await modelNames(), ["second", "first", "third"])
      assert.strictEqual(await runWith("three", { model_name: "third" }), "model-third", "a model the edit added")
      assert.isUndefined(await cronWith("third"), "a cron of a model the edit added")
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

  it("the title setting, the custom agents API and the suggestions follow the edit; a startup-only one does not", async () => {
    const { capture, logged } = captureLogs()
    const file = Path.join(Support.tempDir("antler-gw-reload-title-"), "config.yaml")
    const gateway = await Support.start({
      script: () => "Hello.",
      file,
      reload: true,
      logger: capture,
      config: { title: { enabled: false } }
    })
    try {
      const client = new Client({ apiUrl: gateway.url })
      const titleOf = async (content: string) => {
        const thread = await client.threads.create()
        await client.runs.wait(thread.thread_id, "lead_agent", { input: human(content) })
        return ((await client.threads.getState(thread.thread_id)).values as any).title
      }
      assert.isNull(await titleOf("Plan a trip to the mountains in spring"))
      Fs.writeFileSync(file, Yaml.stringify({
        ...Support.baseConfig(gateway.scripted.url),
        title: { enabled: true, max_chars: 12 },
        gateway: { heartbeat_seconds: 5 }
      }))
      assert.strictEqual(await titleOf("Plan a trip to the mountains in spring"), "Plan a tr...")
      // what the gateway's own endpoints read follows too
      const get = async (path: string) => (await fetch(`${gateway.url}${path}`)).json() as Promise<any>
      assert.deepStrictEqual(await get("/api/suggestions/config"), { enabled: true, max_suggestions: 3 })
      assert.strictEqual((await get("/api/features")).agents_api.enabled, true)
      const { url } = gateway.scripted
      const createAgent = (model: string) =>
        fetch(`${gateway.url}/api/agents`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ name: `helper-${model}`, model })
        })
      assert.strictEqual((await createAgent("extra")).status, 422, "a model no configuration names")
      Fs.writeFileSync(file, Yaml.stringify({
        ...Support.baseConfig(url),
        models: [...(Support.baseConfig(url).models as Array<unknown>), { name: "extra", model: "extra", base_url: url }],
        suggestions: { max_suggestions: 2 }
      }))
      assert.deepStrictEqual(await get("/api/suggestions/config"), { enabled: true, max_suggestions: 2 })
      assert.strictEqual((await createAgent("extra")).status, 201, "a model the edit added")
      Fs.writeFileSync(file, Yaml.stringify({ ...Support.baseConfig(url), agents_api: { enabled: false } }))
      assert.strictEqual((await get("/api/features")).agents_api.enabled, false)
      assert.strictEqual((await fetch(`${gateway.url}/api/agents`)).status, 403)
      assert.isTrue(logged.some((line) =>
        line === `${file}: gateway changed; that section is read when the process starts, so the edit takes ` +
          "effect on a restart"
      ), logged.join("\n"))
    } finally {
      await gateway.stop()
    }
  }, 60_000)
})

const scope = Effect.runSync(Scope.make())
const servers: Array<ServeProcess> = []
afterAll(async () => {
  for (const server of servers) server.child.kill("SIGKILL")
  await Effect.runPromise(Scope.close(scope, Exit.void))
})

describe("antler serve with config.yaml edited", () => {
  it("the runs after the edit use it; a broken edit is refused once, in its output", async () => {
    const scripted = await Effect.runPromise(Scope.extend(ScriptedChatServer.start(() => "Hello."), scope))
    const home = Support.tempDir("antler-serve-reload-")
    const file = Path.join(home, "config.yaml")
    const write = (...names: ReadonlyArray<string>) =>
      Fs.writeFileSync(file, Yaml.stringify({
        models: names.map((name) => model(name, scripted.url)),
        memory: { enabled: false },
        sandbox: { allow_host_bash: false }
      }))
    write("first", "second")
    const server = serveProcess(home, file)
    servers.push(server)
    const client = new Client({ apiUrl: await server.url })
    const thread = await client.threads.create()
    const run = async () => {
      const before = scripted.requests.length
      await client.runs.wait(thread.thread_id, "lead_agent", { input: human("hi") })
      return scripted.requests[before]!.model
    }
    assert.strictEqual(await run(), "model-first")
    write("second", "first")
    await until(async () => (await run()) === "model-second", "a run with the edited default model", 60, 250)
    Fs.writeFileSync(file, "models: [ { name: broken\n")
    const refusal = `${file} changed but was not taken`
    await eventually(async () => (await run(), server.output().includes(refusal) ? true : undefined), () =>
      `the refusal in the output:\n${server.output()}`, { tries: 60, everyMs: 250 })
    assert.strictEqual(await run(), "model-second", "the last good configuration")
    write("first")
    await until(async () => (await run()) === "model-first", "a run with the fixed file's model", 60, 250)
    assert.lengthOf(server.output().split(refusal), 2, `one refusal:\n${server.output()}`)
  }, 120_000)
})
