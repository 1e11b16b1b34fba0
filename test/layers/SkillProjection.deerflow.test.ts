/**
 * Mirrors DeerFlow's test_skill_projection.py and test_user_scoped_skill_storage.py (the parts about what the
 * model may read of the skills): DeerFlow's sandbox mounts a copy of the enabled skills only; Antler's file tools
 * refuse a disabled skill's folder and leave it out of listings (SandboxTools.test has the plain case). Here the
 * cases where the folder is not simply `{category}/{name}`: a skill in a namespace folder, two skills of one name in
 * two namespaces (both hidden when that name is disabled), a SKILL.md inside a package (the package's data, not a
 * skill of its own, hidden with its package), and a custom skill disabled beside another (only it is hidden).
 * The real tools over real files (bash on the host, `allow_host_bash`); the states are the home's
 * `extensions_config.json`, read at every call.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as LocalSandbox from "../../src/layers/LocalSandbox.js"
import * as SandboxTools from "../../src/layers/SandboxTools.js"
import * as SkillsDirectory from "../../src/layers/SkillsDirectory.js"
import * as Toolkit from "../../src/layers/Toolkit.js"
import { AppConfigService, defaults } from "../../src/services/AppConfig.js"
import { SandboxProvider } from "../../src/services/Sandbox.js"
import type { JsonObject } from "../../src/state/Message.js"
import { inRun, tempDirs } from "../support/fixtures.js"

const tempDir = tempDirs()

const skillFile = (name: string) =>
  `---\nname: ${name}\ndescription: The ${name} skill.\n---\n# ${name}\nBODY-${name}\n`

/** Skills as files (relative path to content), the file tools over them, and the skills' states to set. */
const setup = (files: Readonly<Record<string, string>>) => {
  const home = tempDir("antler-projection-")
  const skills = Path.join(home, "skills")
  for (const [relative, content] of Object.entries(files)) {
    Fs.mkdirSync(Path.dirname(Path.join(skills, relative)), { recursive: true })
    Fs.writeFileSync(Path.join(skills, relative), content)
  }
  const base = defaults()
  const app = AppConfigService.of({
    config: {
      ...base,
      skills: { ...base.skills, path: skills },
      sandbox: { ...base.sandbox, allow_host_bash: true }
    },
    source: undefined,
    home,
    ignored: []
  })
  const provider = LocalSandbox.make(app, { bwrap: "off" })
  const call = (name: string, args: JsonObject) =>
    Effect.flatMap(SandboxTools.tools({ vision: false }), (tools) =>
      Toolkit.make(tools).call({ id: `call-${name}`, name, args: { description: "x", ...args } })).pipe(
        Effect.map((result) => String(result.message.content)),
        Effect.provideService(SandboxProvider, provider),
        Effect.provideService(AppConfigService, app),
        Effect.provide(inRun({ threadId: "t1", userId: "u1" }).context)
      )
  const states = (enabled: Readonly<Record<string, boolean>>) =>
    Fs.writeFileSync(
      Path.join(home, "extensions_config.json"),
      JSON.stringify({
        mcpServers: {},
        skills: Object.fromEntries(Object.entries(enabled).map(([name, on]) => [name, { enabled: on }]))
      })
    )
  const catalog = () => SkillsDirectory.catalogOf(app)
  return { call, states, catalog }
}

const refused = (name: string) =>
  `Error: Skill '${name}' is disabled. Access to its files is blocked. Enable the skill in settings before using it.`

describe("what the model may read of disabled skills (DeerFlow's enabled-only projection)", () => {
  // test_disabling_namespaced_skill_hides_its_real_projection_path
  it.effect("a namespaced skill disabled: its real folder is refused and left out of a listing", () =>
    Effect.gen(function*() {
      const { call, states } = setup({
        "public/team/ns-skill/SKILL.md": skillFile("ns-skill"),
        "public/team/other/SKILL.md": skillFile("other")
      })
      states({ "ns-skill": false })
      const path = "/mnt/skills/public/team/ns-skill/SKILL.md"
      assert.strictEqual(yield* call("read_file", { path }), refused("ns-skill"))
      assert.strictEqual(
        yield* call("ls", { path: "/mnt/skills/public/team" }),
        "/mnt/skills/public/team/other/\n/mnt/skills/public/team/other/SKILL.md"
      )
      assert.include(yield* call("read_file", { path: "/mnt/skills/public/team/other/SKILL.md" }), "BODY-other")
      states({ "ns-skill": true })
      assert.include(yield* call("read_file", { path }), "BODY-ns-skill")
    }))

  // test_disabling_duplicate_namespaced_public_skills_hides_every_path
  it.effect("two skills of one name in two namespaces: disabling the name hides both folders", () =>
    Effect.gen(function*() {
      const { call, catalog, states } = setup({
        "public/a/dup/SKILL.md": skillFile("dup"),
        "public/b/dup/SKILL.md": skillFile("dup")
      })
      // the prompt lists the name once (the later one), the other is shadowed
      assert.deepStrictEqual(catalog().skills.map((s) => s.location), ["/mnt/skills/public/b/dup/SKILL.md"])
      states({ dup: false })
      for (const path of ["/mnt/skills/public/a/dup/SKILL.md", "/mnt/skills/public/b/dup/SKILL.md"]) {
        assert.strictEqual(yield* call("read_file", { path }), refused("dup"), path)
      }
      assert.strictEqual(
        yield* call("grep", { path: "/mnt/skills", pattern: "BODY" }),
        "No matches found under /mnt/skills"
      )
      // host bash sees neither folder: a command naming one is refused, a search finds nothing of either
      const named = yield* call("bash", { command: "cat /mnt/skills/public/a/dup/SKILL.md" })
      assert.match(named, /^Error: Command refused: /)
      const searched = yield* call("bash", { command: "grep -r BODY /mnt/skills; echo searched" })
      assert.include(searched, "searched")
      assert.notInclude(searched, "BODY-dup")
    }))

  // test_nested_skill_frontmatter_is_supporting_data_inside_parent_package and
  // test_user_scoped_skill_storage.py::test_public_skill_package_children_are_not_registered
  it.effect("a SKILL.md inside a package is the package's data: no skill, no state of its own, hidden with it", () =>
    Effect.gen(function*() {
      const { call, catalog, states } = setup({
        "public/parent/SKILL.md": skillFile("parent"),
        "public/parent/examples/child/SKILL.md": skillFile("child")
      })
      assert.deepStrictEqual(catalog().skills.map((s) => s.name), ["parent"])
      const nested = "/mnt/skills/public/parent/examples/child/SKILL.md"
      // a state for the nested name is no skill's: the file is read as the parent's data
      states({ child: false })
      assert.include(yield* call("read_file", { path: nested }), "BODY-child")
      states({ parent: false })
      assert.strictEqual(yield* call("read_file", { path: nested }), refused("parent"))
    }))

  // test_disabling_custom_skill_hides_only_target_while_rebuilding
  it.effect("a custom skill disabled hides only it; the other custom and public skills read as before", () =>
    Effect.gen(function*() {
      const { call, states } = setup({
        "public/pub/SKILL.md": skillFile("pub"),
        "custom/mine/SKILL.md": skillFile("mine"),
        "custom/kept/SKILL.md": skillFile("kept")
      })
      states({ mine: false })
      assert.strictEqual(yield* call("read_file", { path: "/mnt/skills/custom/mine/SKILL.md" }), refused("mine"))
      assert.include(yield* call("read_file", { path: "/mnt/skills/custom/kept/SKILL.md" }), "BODY-kept")
      assert.include(yield* call("read_file", { path: "/mnt/skills/public/pub/SKILL.md" }), "BODY-pub")
      assert.strictEqual(
        yield* call("glob", { path: "/mnt/skills", pattern: "**/SKILL.md" }),
        [
          "Found 2 paths under /mnt/skills",
          "1. /mnt/skills/custom/kept/SKILL.md",
          "2. /mnt/skills/public/pub/SKILL.md"
        ].join("\n")
      )
    }))
})
