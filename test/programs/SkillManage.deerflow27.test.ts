/**
 * DeerFlow's `test_skill_manage_tool.py`, the cases where Antler differed: what the model reads when SkillScan
 * refuses a `skill_manage` write (DeerFlow's `_raise_static_block`: the message, then ` Findings: ` and the
 * blocking findings as `json.dumps` writes them).
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
import { inRun, runContext, tempDirs } from "../support/fixtures.js"

const tempDir = tempDirs()

const skillContent = (name: string) => `---\nname: ${name}\ndescription: Demo skill\n---\n\n# ${name}\n`

const adminCall = (root: string, args: Record<string, unknown>) => {
  const tool = SkillManage.make(CustomSkills.make(root))
  const context = runContext("thread-1")
  return tool.handler(Schema.decodeUnknownSync(SkillManage.Args)(args), { id: "c", name: SkillManage.NAME, args }).pipe(
    Effect.provide(Context.add(inRun({ threadId: "thread-1" }).context, RunContext, {
      ...context,
      options: { ...context.options, admin: true }
    }))
  )
}

describe("skill_manage (DeerFlow test_skill_manage_tool.py)", () => {
  // DeerFlow: test_skill_manage_static_critical_blocks_create_before_llm
  it.effect("a create SkillScan blocks is refused with the findings as JSON, and nothing is written", () =>
    Effect.gen(function*() {
      const root = Path.join(tempDir("antler-skill-manage27-"), "skills")
      const content = skillContent("blocked-skill") +
        "\n-----BEGIN RSA PRIVATE KEY-----\nabc\n-----END RSA PRIVATE KEY-----\n"
      const out = yield* adminCall(root, { action: "create", name: "blocked-skill", content })
      const { content: text, status } = out as { content: string; status: string }
      assert.strictEqual(status, "error")
      assert.match(text, /^Error: Static security scan blocked skill 'blocked-skill': secret-private-key \(CRITICAL\)/)
      const at = text.indexOf(" Findings: ")
      assert.isAbove(at, 0, text)
      const json = text.slice(at + " Findings: ".length)
      // Python's json.dumps: ", " and ": " between items, the keys in DeerFlow's order
      assert.match(json, /^\{"skill_name": "blocked-skill", "findings": \[\{"rule_id": "secret-private-key", /)
      const payload = JSON.parse(json)
      assert.deepStrictEqual(Object.keys(payload.findings[0]), [
        "rule_id",
        "severity",
        "file",
        "line",
        "message",
        "remediation",
        "evidence"
      ])
      assert.deepInclude(payload.findings[0], {
        severity: "CRITICAL",
        file: "SKILL.md",
        line: 8,
        evidence: "[redacted]"
      })
      assert.notInclude(text, "abc\n")
      assert.isFalse(Fs.existsSync(Path.join(root, "custom", "blocked-skill", "SKILL.md")))
    }))
})
