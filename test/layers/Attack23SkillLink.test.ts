/**
 * Attack round 23 on the file tools' gate on skills, as the model: a disabled skill's files (and a skill the run's
 * role may not load) are refused to `read_file`, `ls`, `glob` and `grep` by their virtual path under
 * `/mnt/skills`. A symbolic link in the workspace to the skills' host directory (made by `bash` under bubblewrap,
 * whose `ln -s` target is any text: the host path guessed) led there by another virtual path: the gate saw a
 * workspace path and let it through, and the read followed the link into the skills, so `read_file
 * /mnt/user-data/workspace/s/beta/SKILL.md` read the disabled skill. A path that reaches the skills' host directory
 * through a link from elsewhere is now refused as a path leaving the thread's directories; a listing shows no such
 * link. Real files in a temp dir, the real sandbox tools.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as LocalSandbox from "../../src/layers/LocalSandbox.js"
import * as SandboxTools from "../../src/layers/SandboxTools.js"
import * as Toolkit from "../../src/layers/Toolkit.js"
import { AppConfigService, defaults } from "../../src/services/AppConfig.js"
import { SandboxProvider, threadPaths } from "../../src/services/Sandbox.js"
import type { JsonObject } from "../../src/state/Message.js"
import * as Bwrap from "../support/bwrap.js"
import { inRun, tempDirs } from "../support/fixtures.js"

const tempDir = tempDirs()
const bwrapInstalled = await Bwrap.installed()
const W = "/mnt/user-data/workspace"

const skill = (name: string) => `---\nname: ${name}\ndescription: The ${name} skill.\n---\n# ${name}\nSECRET-${name}\n`

/** A sandbox over a skills directory with `alpha` (enabled) and `beta` (disabled); its tools called in a run. */
const setup = (bwrap: "auto" | "off") => {
  const home = tempDir("antler-attack23-link-")
  const skills = tempDir("antler-attack23-skills-")
  for (const name of ["alpha", "beta"]) {
    Fs.mkdirSync(Path.join(skills, "public", name, "notes"), { recursive: true })
    Fs.writeFileSync(Path.join(skills, "public", name, "SKILL.md"), skill(name))
    Fs.writeFileSync(Path.join(skills, "public", name, "notes", "ref.md"), `SECRET-${name}-notes\n`)
  }
  Fs.writeFileSync(
    Path.join(home, "extensions_config.json"),
    JSON.stringify({ mcpServers: {}, skills: { beta: { enabled: false } } })
  )
  const base = defaults()
  const app = AppConfigService.of({
    config: { ...base, skills: { ...base.skills, path: skills } },
    source: undefined,
    home,
    ignored: []
  })
  const provider = LocalSandbox.make(app, { bwrap })
  const call = (name: string, args: JsonObject) =>
    Effect.flatMap(SandboxTools.tools({ vision: false }), (tools) =>
      Toolkit.make(tools).call({ id: `call-${name}`, name, args: { description: "x", ...args } })).pipe(
        Effect.provideService(SandboxProvider, provider),
        Effect.provideService(AppConfigService, app),
        Effect.provide(inRun({ threadId: "t1", userId: "u1" }).context),
        Effect.map((result) => String(result.message.content))
      )
  return { call, skills, workspace: threadPaths(home, "u1", "t1").workspace }
}

/** What the file tools answer through the links `s` (to the skills' `public`) and `b` (to `beta`). */
const throughLinks = (call: ReturnType<typeof setup>["call"]) =>
  Effect.gen(function*() {
    const seen = [
      yield* call("read_file", { path: `${W}/s/beta/SKILL.md` }),
      yield* call("read_file", { path: `${W}/b/notes/ref.md` }),
      yield* call("ls", { path: `${W}/s` }),
      yield* call("ls", { path: `${W}/b` }),
      yield* call("glob", { path: `${W}/s`, pattern: "**/*.md" }),
      yield* call("grep", { path: `${W}/b`, pattern: "SECRET" }),
      yield* call("grep", { path: W, pattern: "SECRET" })
    ]
    return seen
  })

describe("a link from the workspace into the skills' host directory", () => {
  it.effect("does not open a disabled skill's files to read_file, ls, glob or grep", () =>
    Effect.gen(function*() {
      const { call, skills, workspace } = setup("off")
      yield* call("ls", { path: W })
      // (as a command under bubblewrap makes them: `ln -s <host skills>/public s`)
      Fs.symlinkSync(Path.join(skills, "public"), Path.join(workspace, "s"))
      Fs.symlinkSync(Path.join(skills, "public", "beta"), Path.join(workspace, "b"))
      const seen = yield* throughLinks(call)
      for (const text of seen) {
        assert.notInclude(text, "SECRET-beta", text)
        assert.notInclude(text, "beta/notes", text)
      }
      assert.match(seen[0]!, /^Error: /)
      // the skill itself reads as before where it is mounted; the enabled one is not closed
      assert.include(yield* call("read_file", { path: "/mnt/skills/public/alpha/SKILL.md" }), "SECRET-alpha")
      assert.include(yield* call("read_file", { path: "/mnt/skills/public/beta/SKILL.md" }), "is disabled")
    }))

  it.live.skipIf(!bwrapInstalled)("made by bash under bubblewrap, it opens nothing either", () =>
    Effect.gen(function*() {
      const { call, skills } = setup("auto")
      const made = yield* call("bash", {
        command: `ln -s ${skills}/public ${W}/s && ln -s ${skills}/public/beta ${W}/b && echo made`
      })
      assert.include(made, "made")
      for (const text of yield* throughLinks(call)) assert.notInclude(text, "SECRET-beta", text)
    }))
})
