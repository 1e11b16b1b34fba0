/**
 * DeerFlow reads `config.yaml` with PyYAML's `safe_load` (YAML 1.1), where a plain `yes`, `no`, `on` and `off` are
 * booleans: a DeerFlow configuration writing `enabled: yes` is read the same here, not refused as text. `y`, `n`
 * and quoted words stay text, as in PyYAML.
 */
import { assert, describe, it } from "@effect/vitest"
import * as ConfigProvider from "effect/ConfigProvider"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as ConfigFile from "../../src/layers/ConfigFile.js"

const tempFile = (text: string) => {
  const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "antler-config-bools-"))
  const file = Path.join(dir, "config.yaml")
  Fs.writeFileSync(file, text)
  return file
}

const load = (file: string) => ConfigFile.load(file).pipe(Effect.withConfigProvider(ConfigProvider.fromMap(new Map())))

describe("config.yaml booleans as PyYAML reads them", () => {
  it("yes, no, on and off in their three cases are booleans; y, n, other cases and quoted words are text", () => {
    const parsed = ConfigFile.parseYaml([
      "a: yes",
      "b: No",
      "c: ON",
      "d: off",
      "e: [Yes, NO, On, OFF, true, False]",
      "f: y",
      "g: n",
      "h: yEs",
      "i: 'yes'",
      "j: \"off\"",
      "on: key"
    ].join("\n"))
    assert.isTrue(Either.isRight(parsed))
    assert.deepStrictEqual(Either.getOrThrow(parsed), {
      a: true,
      b: false,
      c: true,
      d: false,
      e: [true, false, true, false, true, false],
      f: "y",
      g: "n",
      h: "yEs",
      i: "yes",
      j: "off",
      true: "key"
    })
  })

  it.effect("a DeerFlow configuration switching things with yes and off loads, the switches read", () =>
    Effect.gen(function*() {
      const file = tempFile([
        "models:",
        "  - name: seeing",
        "    use: langchain_openai:ChatOpenAI",
        "    model: gpt-4o",
        "    supports_vision: yes",
        "uploads:",
        "  auto_convert_documents: on",
        "memory:",
        "  enabled: off",
        ""
      ].join("\n"))
      const loaded = yield* load(file)
      assert.isTrue(loaded.config.models[0]!.supports_vision)
      assert.isTrue(loaded.config.uploads.auto_convert_documents)
      assert.isFalse(loaded.config.memory.enabled)
    }))

  it.effect("a word that is no boolean in either is still refused, naming the key", () =>
    Effect.gen(function*() {
      const file = tempFile("models:\n  - name: m\n    model: m\n    supports_vision: maybe\n")
      const error = yield* Effect.flip(load(file))
      assert.include(error.message, `${file}: models[0].supports_vision: expected true or false, got "maybe"`)
    }))
})
