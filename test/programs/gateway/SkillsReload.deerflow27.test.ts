/**
 * DeerFlow's test_skills_reload.py, the case Antler's other tests leave open: skills changed on disk by hand (one
 * edited, one added, one removed) are what the next run's prompt lists after `POST /api/skills/reload`, though an
 * agent was built for the skills as they were. Antler keeps no skill cache (the factory builds an agent again when
 * a SKILL.md changed), so the reload only answers; the cases on a failing or timed-out cache refresh have nothing
 * to pin here.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { messageText } from "../../support/modelRequests.js"
import * as Requests from "../../support/requests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const CAROL = "carol-token-skills-reload-27"

let gateway: TestGateway
let dir: string

const writeSkill = (name: string, description: string) => {
  Fs.mkdirSync(Path.join(dir, "skills", "public", name), { recursive: true })
  Fs.writeFileSync(
    Path.join(dir, "skills", "public", name, "SKILL.md"),
    `---\nname: ${name}\ndescription: ${description}\n---\n# ${name}\n`
  )
}

beforeAll(async () => {
  dir = Support.tempDir("antler-skills-reload-")
  writeSkill("changed-skill", "old description")
  writeSkill("removed-skill", "removed description")
  gateway = await Support.start({
    script: () => "ok",
    source: Path.join(dir, "config.yaml"),
    config: { gateway: { auth: { tokens: [{ token: CAROL, user: "carol", admin: true }] } } }
  })
})
afterAll(() => gateway?.stop())

const call = Requests.api(() => gateway)

const systemPrompt = async () => {
  const before = gateway.scripted.requests.length
  const response = await call(CAROL, "/runs/wait", {
    method: "POST",
    body: { assistant_id: "lead-agent", input: { messages: [{ role: "user", content: "hi" }] } }
  })
  assert.strictEqual(response.status, 200, await response.text())
  return messageText(gateway.scripted.requests[before]!.messages[0]!)
}

describe("DeerFlow's skills reload", () => {
  // DeerFlow: test_reload_invalidates_all_user_caches_and_rescans_external_changes
  it("after skills are edited, added and removed by hand, the next run's prompt lists them as they are", async () => {
    const first = await systemPrompt()
    assert.include(first, "old description")
    assert.include(first, "removed-skill")
    writeSkill("changed-skill", "new description")
    writeSkill("added-skill", "added description")
    Fs.rmSync(Path.join(dir, "skills", "public", "removed-skill", "SKILL.md"))
    assert.strictEqual((await call(CAROL, "/skills/reload", { method: "POST" })).status, 200)
    const next = await systemPrompt()
    assert.include(next, "added-skill")
    assert.include(next, "new description")
    assert.notInclude(next, "old description")
    assert.notInclude(next, "removed-skill")
  })
})
