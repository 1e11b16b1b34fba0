/**
 * DeerFlow's skills update router (blocking_io/test_skills_update_router), through the gateway: an admin's switch of
 * a skill is written into an `extensions_config.json` that has no `skills` key yet, the file's other keys kept
 * (test_update_skill_persists_state_when_source_omits_skills), and beside the states of other skills
 * (test_update_skill_writes_from_snapshot_without_mutating_singleton); the skill then reads as switched, in the list
 * and alone (`GET /api/skills/{name}`), and a user who is not an admin may not switch it (test_skills_router_authz).
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Requests from "../../support/requests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const CAROL = "carol-token-gateway26-skills00"

let gateway: TestGateway
let dir: string
const alice = Requests.as(() => gateway, Support.ALICE)
const carol = Requests.as(() => gateway, CAROL)
const file = () => Path.join(dir, "extensions_config.json")
const stored = () => JSON.parse(Fs.readFileSync(file(), "utf8"))

beforeAll(async () => {
  dir = Support.tempDir("antler-gw26-skills-")
  for (const name of ["demo-skill", "other-skill"]) {
    Fs.mkdirSync(Path.join(dir, "skills", "public", name), { recursive: true })
    Fs.writeFileSync(
      Path.join(dir, "skills", "public", name, "SKILL.md"),
      `---\nname: ${name}\ndescription: Description for ${name}\nlicense: MIT\n---\n# ${name}\n`
    )
  }
  Fs.writeFileSync(file(), JSON.stringify({ mcpServers: {}, mcpInterceptors: ["pkg.interceptor:build"] }))
  gateway = await Support.start({
    script: () => "ok",
    source: Path.join(dir, "config.yaml"),
    config: {
      gateway: {
        heartbeat_seconds: 1,
        auth: { tokens: [{ token: Support.ALICE, user: "alice" }, { token: CAROL, user: "carol", admin: true }] }
      }
    }
  })
})
afterAll(() => gateway?.stop())

describe("DeerFlow's skills update router", () => {
  it("writes a switch into a file without skills, keeping its other keys and the other skills' states", async () => {
    const refused = await alice("PUT", "/api/skills/demo-skill", { enabled: false })
    assert.strictEqual(refused.status, 403, refused.text)
    assert.notProperty(stored(), "skills")

    const off = await carol("PUT", "/api/skills/demo-skill", { enabled: false })
    assert.strictEqual(off.status, 200, off.text)
    assert.isFalse(off.json().enabled)
    assert.deepStrictEqual(stored(), {
      mcpServers: {},
      mcpInterceptors: ["pkg.interceptor:build"],
      skills: { "demo-skill": { enabled: false } }
    })
    assert.strictEqual((await carol("PUT", "/api/skills/other-skill", { enabled: true })).status, 200)
    assert.deepStrictEqual(stored().skills, {
      "demo-skill": { enabled: false },
      "other-skill": { enabled: true }
    })

    // read back, by any user
    const one = await alice("GET", "/api/skills/demo-skill")
    assert.strictEqual(one.status, 200, one.text)
    assert.isFalse(one.json().enabled)
    const listed = (await alice("GET", "/api/skills")).json().skills
    assert.deepStrictEqual(
      listed.map((s: { name: string; enabled: boolean }) => [s.name, s.enabled]).sort(),
      [["demo-skill", false], ["other-skill", true]]
    )
  })
})
