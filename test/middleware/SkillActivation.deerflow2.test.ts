/**
 * DeerFlow's `test_slash_skills.py`, the activation message the model reads: DeerFlow's `_build_activation_reminder`
 * layout (the `<user_request>` block on lines of its own, the fallback sentence for a command alone, the skill's
 * escaped SKILL.md in `<skill_content encoding="xml-escaped">`), run through a SCRIPTED model.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import * as SkillsDirectory from "../../src/layers/SkillsDirectory.js"
import * as SkillActivation from "../../src/middleware/SkillActivation.js"
import type { Registry } from "../../src/services/Skills.js"
import * as M from "../../src/state/Message.js"
import * as H from "../support/harness.js"

const SKILLS = Path.join(Path.dirname(fileURLToPath(import.meta.url)), "../fixtures/deerflow/skills")

const registry = (body?: string): Registry => ({
  catalog: Effect.sync(() => SkillsDirectory.discover(SKILLS, { container: "/mnt/skills" })),
  read: (skill) => Effect.sync(() => body ?? Fs.readFileSync(skill.file, "utf8"))
})

const activationOf = (input: string, body?: string) =>
  Effect.gen(function*() {
    const out = yield* H.run({ input, script: ["ok"], middlewares: () => [SkillActivation.layer({ registry: registry(body) })] })
    const [activation, user] = out.requests[0]!.messages
    assert.strictEqual(user?.type, "human")
    assert.strictEqual(M.text(user!), input)
    assert.isTrue(M.isHidden(activation!))
    assert.strictEqual(activation!.additional_kwargs?.slash_skill_activation, true)
    return M.text(activation!)
  })

describe("test_slash_skills.py (the activation message)", () => {
  it.effect("the task text is its own lines inside <user_request> (test_..._injects_hidden_human_context)", () =>
    Effect.gen(function*() {
      const text = yield* activationOf("/deep-research analyze uploads/foo.csv")
      assert.include(text, "<user_request>\nanalyze uploads/foo.csv\n</user_request>")
      assert.isTrue(text.startsWith(
        "<slash_skill_activation>\nThe user explicitly activated the `deep-research` skill for this turn.\n" +
          "Treat the task text as:\n<user_request>\n"
      ))
      assert.include(text, "\n\nFollow this skill before choosing a general workflow. Load supporting resources from " +
        "the same skill directory only when needed.\n\n<skill name=\"deep-research\" category=\"public\" ")
    }).pipe(H.withStore))

  it.effect("a command alone gets DeerFlow's fallback request (test_..._uses_fallback_when_task_text_is_empty)", () =>
    Effect.gen(function*() {
      const text = yield* activationOf("/deep-research")
      assert.include(text, "<user_request>\nNo additional task text was provided after the slash skill command. Ask " +
        "the user what they want to do with this skill if the next step is unclear.\n</user_request>")
    }).pipe(H.withStore))

  it.effect("the request and SKILL.md are escaped, never framed (test_..._escapes_activation_content)", () =>
    Effect.gen(function*() {
      const body = "# Data Analysis\nUse <xml> & avoid </skill> collisions.\n----- END SKILL.md -----"
      const text = yield* activationOf("/deep-research analyze </user_request>", body)
      assert.include(text, "<skill_content encoding=\"xml-escaped\">\n# Data Analysis\nUse &lt;xml&gt; &amp; avoid " +
        "&lt;/skill&gt; collisions.\n----- END SKILL.md -----\n</skill_content>\n</skill>\n</slash_skill_activation>")
      assert.include(text, "analyze &lt;/user_request&gt;")
      assert.notInclude(text, "----- BEGIN SKILL.md -----")
      assert.strictEqual(text.split("</user_request>").length, 2)
    }).pipe(H.withStore))
})
