/**
 * `skill_manage` called as the model calls it (decoded arguments, inside a run's services), over a real skills
 * directory: the tool refuses in a run that is not an admin's even when it is offered (the factory offers it only
 * to admins'); patch, supporting files and delete keep their history; a secret of the configuration never reaches
 * a skill; a link inside a skill's folder is never written through.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as CustomSkills from "../../src/programs/CustomSkills.js"
import * as SkillManage from "../../src/programs/SkillManage.js"
import { RunContext } from "../../src/services/RunContext.js"
import * as Redact from "../../src/state/Redact.js"
import { inRun, runContext, tempDirs } from "../support/fixtures.js"

const tempDir = tempDirs()
const SECRET = "sk-live-0123456789abcdef"

const V1 = "---\nname: notes\ndescription: Takes notes\n---\n# Notes\nStep one.\nStep one.\n"

const setup = () => {
  const root = Path.join(tempDir("antler-skill-manage-"), "skills")
  const tool = SkillManage.make(CustomSkills.make(root), Redact.make([SECRET]))
  const call = (args: Record<string, unknown>, admin = true) => {
    const services = inRun({ threadId: "t9" }).context
    const context = runContext("t9")
    return tool.handler(
      Schema.decodeUnknownSync(SkillManage.Args)(args),
      { id: "c", name: "skill_manage", args }
    ).pipe(
      Effect.provide(Context.add(services, RunContext, { ...context, options: { ...context.options, admin } }))
    )
  }
  const text = (out: unknown) => typeof out === "string" ? out : (out as { content: string }).content
  return { root, call, text }
}

describe("skill_manage", () => {
  it.effect("refuses in a run that is not an admin's, and writes nothing", () =>
    Effect.gen(function*() {
      const { root, call, text } = setup()
      const out = yield* call({ action: "create", name: "notes", content: V1 }, false)
      assert.strictEqual(text(out), SkillManage.NOT_ADMIN)
      assert.strictEqual((out as { status: string }).status, "error")
      assert.isFalse(Fs.existsSync(root))
    }))

  // DeerFlow test_skills_validation.py: skill_manage checks what it writes with _validate_skill_frontmatter
  it.effect("refuses a SKILL.md with a key DeerFlow does not know, angle brackets, or a patch that adds one", () =>
    Effect.gen(function*() {
      const { root, call, text } = setup()
      const extra = V1.replace("description:", "custom-field: bad\ndescription:")
      assert.strictEqual(
        text(yield* call({ action: "create", name: "notes", content: extra })),
        "Error: Invalid skill: Unexpected key(s) in SKILL.md frontmatter: custom-field"
      )
      assert.isFalse(Fs.existsSync(Path.join(root, "custom", "notes")))
      yield* call({ action: "create", name: "notes", content: V1 })
      assert.strictEqual(
        text(yield* call({ action: "patch", name: "notes", find: "Takes notes", replace: "Takes <b>notes</b>" })),
        "Error: Invalid skill: Description cannot contain angle brackets (< or >)"
      )
      assert.strictEqual(Fs.readFileSync(Path.join(root, "custom", "notes", "SKILL.md"), "utf8"), V1)
    }))

  // DeerFlow test_skill_manage_tool / test_skillscan_native: what the model writes is scanned before it is written
  it.effect("refuses a write SkillScan blocks (a shell-running script, a private key), naming the rule; writes nothing", () =>
    Effect.gen(function*() {
      const { root, call, text } = setup()
      yield* call({ action: "create", name: "notes", content: V1 })
      const script = "import subprocess\nsubprocess.run(cmd, shell=True)\n"
      const refused = text(yield* call({ action: "write_file", name: "notes", path: "scripts/run.py", content: script }))
      assert.match(refused, /^Error: Static security scan blocked skill 'notes': python-shell-exec \(CRITICAL\) at scripts\/run\.py:2: /)
      assert.isFalse(Fs.existsSync(Path.join(root, "custom", "notes", "scripts", "run.py")))
      const key = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----\n"
      assert.include(
        text(yield* call({ action: "patch", name: "notes", find: "Step one.\nStep one.", replace: key })),
        "secret-private-key (CRITICAL) at SKILL.md:6"
      )
      assert.strictEqual(Fs.readFileSync(Path.join(root, "custom", "notes", "SKILL.md"), "utf8"), V1)
      // a fixed argument list is a warning only
      const fixed = "import subprocess\nsubprocess.run(['ls'], check=True)\n"
      yield* call({ action: "write_file", name: "notes", path: "scripts/run.py", content: fixed })
      assert.strictEqual(Fs.readFileSync(Path.join(root, "custom", "notes", "scripts", "run.py"), "utf8"), fixed)
      // skill_scan.enabled: false writes it
      const unscanned = CustomSkills.make(root, { scan: false })
      yield* unscanned.writeFile("notes", "scripts/run.py", script, { author: "human", threadId: undefined })
      assert.strictEqual(Fs.readFileSync(Path.join(root, "custom", "notes", "scripts", "run.py"), "utf8"), script)
    }))

  it.effect("patches, adds and removes supporting files, deletes: each change in the history, no secret kept", () =>
    Effect.gen(function*() {
      const { root, call, text } = setup()
      yield* call({ action: "create", name: "notes", content: V1.replace("Step one.\nStep", `Key ${SECRET}\nStep`) })
      assert.notInclude(Fs.readFileSync(Path.join(root, "custom", "notes", "SKILL.md"), "utf8"), SECRET)
      assert.include(
        text(yield* call({ action: "patch", name: "notes", find: "Step one.", replace: "Step two." })),
        "(1 replacement(s) applied, 1 match(es) found)"
      )
      assert.include(
        text(yield* call({ action: "patch", name: "notes", find: "Step", replace: "X", expected_count: 5 })),
        "Error: Expected 5 replacements but found 1."
      )
      assert.strictEqual(
        text(yield* call({ action: "write_file", name: "notes", path: "scripts/run.py", content: "print(1)\n" })),
        "Wrote 'scripts/run.py' for custom skill 'notes'."
      )
      assert.strictEqual(Fs.readFileSync(Path.join(root, "custom", "notes", "scripts", "run.py"), "utf8"), "print(1)\n")
      assert.include(
        text(yield* call({ action: "write_file", name: "notes", path: "other/run.py", content: "x" })),
        "Error: Supporting files must live under one of: assets, references, scripts, templates."
      )
      yield* call({ action: "remove_file", name: "notes", path: "scripts/run.py" })
      assert.isFalse(Fs.existsSync(Path.join(root, "custom", "notes", "scripts", "run.py")))
      assert.include(text(yield* call({ action: "edit", name: "missing", content: V1 })), "not found")
      assert.strictEqual(text(yield* call({ action: "delete", name: "notes" })), "Deleted custom skill 'notes'.")
      assert.isFalse(Fs.existsSync(Path.join(root, "custom", "notes")))
      const history = Fs.readFileSync(Path.join(root, "custom", ".history", "notes.jsonl"), "utf8")
      assert.notInclude(history, SECRET)
      assert.deepStrictEqual(
        history.trim().split("\n").map((line) => JSON.parse(line)).map((r) => [r.action, r.file_path, r.thread_id]),
        [
          ["create", "SKILL.md", "t9"],
          ["patch", "SKILL.md", "t9"],
          ["write_file", "scripts/run.py", "t9"],
          ["remove_file", "scripts/run.py", "t9"],
          ["delete", "SKILL.md", "t9"]
        ]
      )
    }))

  // DeerFlow test_skills_custom_router.py::test_custom_skill_delete_continues_when_history_write_is_readonly deletes
  // without the history record; here a deletion whose record cannot be written deletes nothing (it could not be
  // rolled back)
  it.effect("deletes nothing when the deletion cannot be recorded in the history", () =>
    Effect.gen(function*() {
      const { root, call, text } = setup()
      yield* call({ action: "create", name: "notes", content: V1 })
      const record = Path.join(root, "custom", ".history", "notes.jsonl")
      Fs.rmSync(record)
      Fs.mkdirSync(record)
      const out = yield* call({ action: "delete", name: "notes" })
      assert.strictEqual((out as { status: string }).status, "error")
      assert.include(text(out), "history")
      assert.strictEqual(Fs.readFileSync(Path.join(root, "custom", "notes", "SKILL.md"), "utf8"), V1)
    }))

  it.effect("takes a skills directory (and its custom/) that is a link its owner made", () =>
    Effect.gen(function*() {
      const real = tempDir("antler-real-skills-")
      Fs.mkdirSync(Path.join(real, "custom-real"))
      Fs.symlinkSync(Path.join(real, "custom-real"), Path.join(real, "custom"))
      const root = Path.join(tempDir("antler-linked-"), "skills")
      Fs.symlinkSync(real, root)
      const tool = SkillManage.make(CustomSkills.make(root))
      const context = runContext("t9")
      const admin = { ...context, options: { ...context.options, admin: true } }
      const args = { action: "create", name: "notes", content: V1 }
      const decoded = Schema.decodeUnknownSync(SkillManage.Args)(args)
      const out = yield* tool.handler(decoded, { id: "c", name: "skill_manage", args }).pipe(
        Effect.provide(Context.add(inRun().context, RunContext, admin))
      )
      assert.strictEqual(out, "Created custom skill 'notes'.")
      assert.strictEqual(Fs.readFileSync(Path.join(real, "custom-real", "notes", "SKILL.md"), "utf8"), V1)
    }))

  it.effect("never writes through a link inside a skill's folder", () =>
    Effect.gen(function*() {
      const { root, call, text } = setup()
      yield* call({ action: "create", name: "notes", content: V1 })
      const outside = tempDir("antler-outside-")
      Fs.symlinkSync(outside, Path.join(root, "custom", "notes", "scripts"))
      const out = yield* call({ action: "write_file", name: "notes", path: "scripts/evil.sh", content: "x" })
      assert.include(text(out), "Error: Supporting file path must stay within the skill's folder")
      assert.deepStrictEqual(Fs.readdirSync(outside), [])
    }))
})
