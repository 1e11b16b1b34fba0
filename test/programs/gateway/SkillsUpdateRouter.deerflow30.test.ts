/**
 * DeerFlow's `blocking_io/test_skills_update_router.py`, what an operator sees of it through a real gateway: a skill
 * switched off through `PUT /api/skills/{name}` is written to `extensions_config.json` beside the states already
 * there, even when the file has no `skills` key yet, its other keys (`mcpServers`, `middlewares`) kept; switches and
 * an MCP change sent at once all land (DeerFlow's shared write lock; `SettingsExtensions.test.ts` too). Its event
 * loop and worker-thread lock cases are Python's.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { as } from "../../support/requests.js"
import * as Support from "./support.js"

let gateway: Support.TestGateway
let dir: string
const file = () => Path.join(dir, "extensions_config.json")
const written = () => JSON.parse(Fs.readFileSync(file(), "utf8"))

beforeAll(async () => {
  dir = Support.tempDir("antler-skills-update-")
  for (const name of ["demo-skill", "other-skill", "third-skill"]) {
    Fs.mkdirSync(Path.join(dir, "skills", "public", name), { recursive: true })
    Fs.writeFileSync(Path.join(dir, "skills", "public", name, "SKILL.md"), `---\nname: ${name}\ndescription: d\n---\n`)
  }
  // no `skills` key: the file as an operator may have written it
  Fs.writeFileSync(file(), JSON.stringify({ mcpServers: {}, middlewares: ["pkg:Middleware"] }))
  gateway = await Support.start({
    script: () => "ok",
    source: Path.join(dir, "config.yaml"),
    // config.yaml's own middlewares (none): the file's are kept, never loaded
    config: { extensions: { middlewares: [] } }
  })
})
afterAll(() => gateway?.stop())

const call = as(() => gateway)

describe("blocking_io/test_skills_update_router.py", () => {
  it("test_update_skill_persists_state_when_source_omits_skills / ..._writes_from_snapshot_...", async () => {
    const answer = await call("PUT", "/api/skills/demo-skill", { enabled: false })
    assert.strictEqual(answer.status, 200, answer.text)
    assert.deepStrictEqual([answer.json().name, answer.json().enabled], ["demo-skill", false])
    assert.deepStrictEqual(written().skills, { "demo-skill": { enabled: false } })
    assert.deepStrictEqual(written().middlewares, ["pkg:Middleware"])
    assert.deepStrictEqual(written().mcpServers, {})
    // a second switch is written beside the first
    assert.strictEqual((await call("PUT", "/api/skills/other-skill", { enabled: false })).status, 200)
    assert.deepStrictEqual(written().skills, { "demo-skill": { enabled: false }, "other-skill": { enabled: false } })
  })

  it("test_update_skill_serializes_concurrent_writes / test_skill_and_mcp_config_writes_are_serialized", async () => {
    const answers = await Promise.all([
      call("PUT", "/api/skills/demo-skill", { enabled: true }),
      call("PUT", "/api/skills/third-skill", { enabled: false }),
      call("PUT", "/api/mcp/config", {
        mcp_servers: { notes: { enabled: false, type: "stdio", command: "npx", args: ["notes-server"] } }
      }),
      call("PUT", "/api/skills/other-skill", { enabled: true })
    ])
    assert.deepStrictEqual(answers.map((a) => a.status), [200, 200, 200, 200], answers.map((a) => a.text).join("\n"))
    const after = written()
    assert.deepStrictEqual(after.skills, {
      "demo-skill": { enabled: true },
      "other-skill": { enabled: true },
      "third-skill": { enabled: false }
    })
    assert.deepStrictEqual(Object.keys(after.mcpServers), ["notes"])
    assert.deepStrictEqual(after.middlewares, ["pkg:Middleware"])
  })
})
