/**
 * DeerFlow's `test_app_config_reload.py`, its loading cases a user meets, through a real `config.yaml` read as
 * `antler` reads it (`ConfigFile.loadFile`): a section whose entries are all commented out (YAML's `null`) loads
 * as that section left out, a list section empty and an object section its defaults (DeerFlow's issue #1444, the
 * `cp config.example.yaml config.yaml` flow). Its reload cases are
 * `ConfigReload.test.ts`'s and `ConfigReloadSections.test.ts`'s.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as ConfigFile from "../../src/layers/ConfigFile.js"
import { tempDirs } from "../support/fixtures.js"

const tempDir = tempDirs()

const loadYaml = (text: string) => {
  const dir = tempDir("antler-cfgnull-")
  const file = Path.join(dir, "config.yaml")
  Fs.writeFileSync(file, text)
  return ConfigFile.loadFile(file, dir)
}

describe("test_app_config_reload.py", () => {
  it.effect("test_app_config_coerces_commented_out_list_sections", () =>
    Effect.gen(function*() {
      const app = yield* loadYaml("models:\n#  - name: gpt\ntools:\n#  - name: web_search\ntool_groups:\n")
      const plain = yield* loadYaml("{}\n")
      assert.deepStrictEqual(app.config.models, [])
      // (no `tools` and `tools: null` both mean no configured tools)
      assert.deepStrictEqual(app.config.tools ?? [], plain.config.tools ?? [])
      assert.deepStrictEqual(app.config.tool_groups, plain.config.tool_groups)
    }))

  it.effect("test_app_config_coerces_commented_out_object_sections", () =>
    Effect.gen(function*() {
      const app = yield* loadYaml(
        "memory:\n#  enabled: false\nsummarization:\nguardrails:\ntool_output:\nrun_events:\n"
      )
      const plain = yield* loadYaml("{}\n")
      for (const section of ["memory", "summarization", "guardrails", "tool_output", "run_events"] as const) {
        assert.deepStrictEqual(app.config[section], plain.config[section], section)
      }
    }))
})
