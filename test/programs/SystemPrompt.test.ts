import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import { assert, describe, it } from "@effect/vitest"
import * as SystemPrompt from "../../src/programs/SystemPrompt.js"

const skillsDir = Path.join(Path.dirname(fileURLToPath(import.meta.url)), "..", "fixtures", "deerflow", "skills")

describe("SystemPrompt", () => {
  it("reads every public DeerFlow skill, with descriptions from YAML front matter (folded ones too)", () => {
    const skills = SystemPrompt.loadSkills(skillsDir, "/mnt/skills")
    assert.lengthOf(skills, 23)
    for (const skill of skills) {
      assert.match(skill.location, /^\/mnt\/skills\/public\/[a-z0-9-]+\/SKILL\.md$/)
      assert.isAbove(skill.description.length, 20, skill.name)
      assert.notMatch(skill.description, /^[>|]/, skill.name)
    }
    const bootstrap = skills.find((s) => s.location.includes("/bootstrap/"))!
    assert.match(bootstrap.description, /^Generate a personalized SOUL\.md through a warm, adaptive onboarding/)
  })

  it("lists the skills in the prompt, escaped, and holds no date or per-thread data", () => {
    const prompt = SystemPrompt.make({
      clarification: true,
      skills: [{ name: "a<b>", description: "x & y", location: "/mnt/skills/public/a/SKILL.md" }],
      skillsContainer: "/mnt/skills"
    })
    assert.include(prompt, "<skill><name>a&lt;b&gt;</name><description>x &amp; y</description>")
    assert.notMatch(prompt, /\d{4}-\d{2}-\d{2}/)
  })
})
