/**
 * A `config.yaml` model entry as DeerFlow's users write it, loaded from a file and called through the real `openai`
 * client against a loopback server. Mirrors DeerFlow's test_model_config.py and test_model_factory.py (what of an
 * entry reaches the provider, api_base and base_url), and test_config_version.py, test_logging_level_from_config.py
 * and test_logging_config.py for the keys Antler does not read (docs/deerflow.md).
 */
import { assert, describe, it } from "@effect/vitest"
import * as ConfigProvider from "effect/ConfigProvider"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as ConfigFile from "../../src/layers/ConfigFile.js"
import * as OpenAiModel from "../../src/layers/OpenAiModel.js"
import * as ScriptedChatServer from "../../src/layers/ScriptedChatServer.js"
import { RunEvents } from "../../src/services/RunEvents.js"
import * as M from "../../src/state/Message.js"
import { inRun, tempDirs } from "../support/fixtures.js"

const tempDir = tempDirs()

const configFile = (lines: ReadonlyArray<string>) => {
  const file = Path.join(tempDir("antler-model-config-"), "config.yaml")
  Fs.writeFileSync(file, lines.join("\n") + "\n")
  return file
}

const load = (file: string) =>
  ConfigFile.load(file).pipe(Effect.withConfigProvider(ConfigProvider.fromMap(new Map())))

describe("a model entry of config.yaml (test_model_config, test_model_factory)", () => {
  it.effect("a context_window of 0 or less is refused naming the key and the model; a positive one is kept", () =>
    Effect.gen(function*() {
      for (const value of [0, -1]) {
        const file = configFile(["models:", "  - name: big", "    model: m", `    context_window: ${value}`])
        const error = yield* Effect.flip(load(file))
        assert.strictEqual(error.reason, "schema")
        assert.include(error.message, `${file}: models[0].context_window: `)
        assert.include(error.message, `got ${value} (model "big")`)
      }
      const kept = yield* load(configFile(["models:", "  - name: big", "    model: m", "    context_window: 128000"]))
      assert.strictEqual(kept.config.models[0]!.context_window, 128_000)
    }))

  // DeerFlow strips pricing and context_window before building the client (they are DeerFlow's, not the
  // provider's); Antler sends no key it does not read, and names the ones it does not read
  it.scopedLive("pricing, context_window and the Responses API switches never reach the provider; base_url wins", () =>
    Effect.gen(function*() {
      const server = yield* ScriptedChatServer.start(() => "ok")
      const file = configFile([
        "models:",
        "  - name: priced",
        "    use: langchain_openai:ChatOpenAI",
        "    model: gpt-5",
        `    base_url: ${server.url}`,
        "    api_base: http://127.0.0.1:9/v1",
        "    context_window: 200000",
        "    use_responses_api: true",
        "    output_version: responses/v1",
        "    pricing: {currency: CNY, input_per_million: 8, output_per_million: 32}"
      ])
      const loaded = yield* load(file)
      assert.deepStrictEqual(loaded.ignored, [
        "models[].use_responses_api",
        "models[].output_version",
        "models[].pricing"
      ])
      const model = yield* OpenAiModel.fromConfig(loaded.config.models)
      const sink = { emit: () => Effect.void }
      yield* model.generate({ systemPrompt: undefined, messages: [M.human("hi")], tools: [], settings: {} }).pipe(
        Effect.provide(Context.add(inRun().context, RunEvents, sink))
      )
      const [body] = server.requests
      assert.strictEqual(body!.model, "gpt-5")
      for (const key of ["pricing", "context_window", "use_responses_api", "output_version", "api_base"]) {
        assert.notProperty(body, key)
      }
    }))

  // Antler ships no config.example.yaml to compare config_version with; log_level and logging are antler serve's
  it.effect("config_version (a number or a string) loads, named as not read; log_level and logging are read", () =>
    Effect.gen(function*() {
      for (const version of ["1", "\"1\"", "26"]) {
        const loaded = yield* load(configFile([
          `config_version: ${version}`,
          "log_level: debug",
          "logging:",
          "  enhance: {enabled: true, format: json}",
          "models:",
          "  - {name: m, model: m}"
        ]))
        assert.deepStrictEqual(loaded.ignored, ["config_version"])
        assert.strictEqual(loaded.config.models[0]!.name, "m")
        assert.strictEqual(loaded.config.log_level, "debug")
        assert.deepStrictEqual(loaded.config.logging.enhance, { enabled: true, format: "json" })
      }
    }))
})
