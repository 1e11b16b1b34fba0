/**
 * DeerFlow test_skills_parser.py, the fields a SKILL.md's front matter gives the skill the model is shown: a
 * quoted name without its quotes, a folded description, the license, `allowed-tools` absent (no restriction), an
 * empty list (no tools) or a list, and the files that are not skills (no name, no description, no front matter,
 * a tool list that is not a list, YAML that does not parse). (The YAML-mistake messages are SkillsDirectory.test.)
 */
import { assert, describe, it } from "@effect/vitest"
import * as SkillsDirectory from "../../src/layers/SkillsDirectory.js"

const parse = (frontMatter: string, body = "# My Skill\n") =>
  SkillsDirectory.parseSkill(`---\n${frontMatter}\n---\n${body}`)

describe("test_skills_parser.py", () => {
  it("a plain, double-quoted or single-quoted name reads the same", () => {
    for (const name of ["my-skill", '"my-skill"', "'my-skill'"]) {
      assert.deepInclude(parse(`name: ${name}\ndescription: A test skill`), { ok: true, name: "my-skill" }, name)
    }
  })

  it("the description, folded over lines, and the license are the skill's", () => {
    assert.deepInclude(parse("name: my-skill\ndescription: Does amazing things"), {
      ok: true,
      description: "Does amazing things"
    })
    assert.deepInclude(parse("name: my-skill\ndescription: >\n  A folded\n  description"), {
      ok: true,
      description: "A folded description"
    })
    assert.deepInclude(parse("name: my-skill\ndescription: x\nlicense: MIT"), { ok: true, license: "MIT" })
  })

  it("allowed-tools: absent is no restriction, [] is no tools, a list is those tools", () => {
    assert.deepInclude(parse("name: my-skill\ndescription: x"), { ok: true, allowedTools: undefined })
    assert.deepInclude(parse("name: my-skill\ndescription: x\nallowed-tools: []"), { ok: true, allowedTools: [] })
    assert.deepInclude(parse("name: my-skill\ndescription: x\nallowed-tools:\n  - bash\n  - read_file"), {
      ok: true,
      allowedTools: ["bash", "read_file"]
    })
  })

  it("not a skill: a tool list that is not a list, no name, no description, no front matter, broken YAML", () => {
    for (const content of [
      "---\nname: my-skill\ndescription: x\nallowed-tools: bash\n---\n",
      "---\ndescription: x\n---\n",
      "---\nname: my-skill\n---\n",
      "# No front matter here\n",
      "---\nname: [unclosed\n---\n"
    ]) {
      assert.isFalse(SkillsDirectory.parseSkill(content).ok, content)
    }
  })
})
