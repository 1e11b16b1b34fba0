/**
 * A configured `glob` / `grep` entry's `max_results` caps the results of every call, as DeerFlow's
 * `_resolve_max_results` does (its config.example.yaml sets 200 and 100): the smaller of the call's and the
 * operator's wins; an invalid value leaves the tool out, naming the key.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as ConfigFile from "../../src/layers/ConfigFile.js"
import * as LocalSandbox from "../../src/layers/LocalSandbox.js"
import * as ToolAssembly from "../../src/programs/ToolAssembly.js"
import { AppConfigService } from "../../src/services/AppConfig.js"
import { threadPaths } from "../../src/services/Sandbox.js"
import * as Tool from "../../src/services/Tool.js"
import * as M from "../../src/state/Message.js"
import { inRun, tempDirs } from "../support/fixtures.js"

const tempDir = tempDirs()
const W = "/mnt/user-data/workspace"

const assembled = (tools: ReadonlyArray<Record<string, unknown>>) =>
  Effect.gen(function*() {
    const home = tempDir("antler-df25-assembly-")
    const app = yield* ConfigFile.fromObject({ tools }, { home })
    const assembly = yield* ToolAssembly.assemble({ vision: false, bash: false }).pipe(
      Effect.provide(LocalSandbox.layer().pipe(Layer.provideMerge(Layer.succeed(AppConfigService, app))))
    )
    const call = (name: string, args: Record<string, unknown>) =>
      Tool.invoke(assembly.tools.find((t) => t.name === name)!, { id: "c", name, args: { description: "x", ...args } })
        .pipe(
          Effect.map((r) => M.contentText(r.message.content)),
          Effect.provide(inRun({ threadId: "t1", userId: "u1" }).context)
        )
    return { assembly, call, workspace: threadPaths(home, "u1", "t1").workspace }
  })

describe("tools[].max_results of glob and grep (DeerFlow's _resolve_max_results)", () => {
  it.effect("the operator's cap wins over a call asking for more; a call asking for fewer gets fewer", () =>
    Effect.gen(function*() {
      const { assembly, call, workspace } = yield* assembled([
        { name: "glob", group: "file:read", use: "deerflow.sandbox.tools:glob_tool", max_results: 2 },
        { name: "grep", group: "file:read", use: "deerflow.sandbox.tools:grep_tool", max_results: "3" }
      ])
      assert.deepStrictEqual(assembly.warnings, [])
      yield* call("glob", { path: W, pattern: "*" }) // acquires the sandbox: the workspace exists from here
      for (const n of [1, 2, 3, 4, 5]) Fs.writeFileSync(Path.join(workspace, `f${n}.txt`), "hit\n")
      const globbed = (yield* call("glob", { path: W, pattern: "*.txt", max_results: 50 })).split("\n")
      assert.strictEqual(globbed[0], `Found 5 paths under ${W} (showing first 2)`)
      assert.lengthOf(globbed, 4)
      const grepped = (yield* call("grep", { path: W, pattern: "hit" })).split("\n")
      assert.strictEqual(grepped[0], `Found 5 matches under ${W} (showing first 3)`)
      const fewer = (yield* call("grep", { path: W, pattern: "hit", max_results: 1 })).split("\n")
      assert.strictEqual(fewer[0], `Found 5 matches under ${W} (showing first 1)`)
    }))

  it.effect("a max_results that is not a whole number leaves the tool out, saying why", () =>
    Effect.gen(function*() {
      const { assembly } = yield* assembled([
        { name: "grep", group: "file:read", use: "deerflow.sandbox.tools:grep_tool", max_results: "lots" }
      ])
      assert.notInclude(assembly.tools.map((t) => t.name), "grep")
      assert.strictEqual(assembly.warnings.length, 1)
      assert.include(assembly.warnings[0]!, "tools[0] (grep): left out: its settings are invalid")
      assert.include(assembly.warnings[0]!, "max_results")
    }))
})
