/**
 * A settings endpoint whose files cannot be read answers a 500 whose `detail` says what could not be done and sends
 * the reader to the server's log, naming no path of the server's disk; the log tells what failed and where. The
 * agents, custom skills and MCP configuration endpoints (the uploads' own: UploadsFields.deerflow27). Real HTTP
 * through the gateway, files broken on the disk under it.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { captureLogs } from "../../support/logs.js"
import * as Requests from "../../support/requests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const ADMIN = "carol-token-0123456789abcdef"

const logs = captureLogs()
let gateway: TestGateway
let dir: string

beforeAll(async () => {
  dir = Support.tempDir("antler-server-faults-")
  gateway = await Support.start({
    script: () => "ok",
    source: Path.join(dir, "config.yaml"),
    logger: logs.capture,
    config: {
      skill_evolution: { enabled: true },
      gateway: { heartbeat_seconds: 1, auth: { tokens: [{ token: ADMIN, user: "carol", admin: true }] } }
    }
  })
})
afterAll(async () => {
  await gateway?.stop()
})

const call = Requests.api(() => gateway)

/** The answer's detail, after checking it is a 500 that names no path of the server's disk. */
const faultOf = async (response: Response): Promise<string> => {
  const text = await response.text()
  assert.strictEqual(response.status, 500, text)
  assert.notInclude(text, dir)
  assert.notInclude(text, gateway.home)
  return JSON.parse(text).detail
}

/** The server's log lines that begin with `start`. */
const loggedOf = (start: string) => logs.logged.filter((line) => line.startsWith(start))

describe("a settings file the server cannot read", () => {
  it("an agent whose SOUL.md is a folder: 500, the agent named; the log names the file", async () => {
    const created = await call(ADMIN, "/agents", {
      method: "POST",
      body: { name: "researcher", description: "Finds papers", soul: "You are careful." }
    })
    assert.strictEqual(created.status, 201, await created.text())
    const agentDir = Path.join(gateway.home, "users", "carol", "agents", "researcher")
    Fs.rmSync(Path.join(agentDir, "SOUL.md"))
    Fs.mkdirSync(Path.join(agentDir, "SOUL.md"))
    const detail = await faultOf(await call(ADMIN, "/agents/researcher"))
    assert.strictEqual(detail, "The agent researcher could not be read or written (see the server's log).")
    const logged = loggedOf("agents endpoint: Cannot read the agent researcher")
    assert.lengthOf(logged, 1, logs.logged.join("\n"))
    assert.include(logged[0], Path.join(agentDir, "SOUL.md"))
  })

  it("a custom skill whose history is a folder: 500; the log names what could not be read", async () => {
    const skill = Path.join(dir, "skills", "custom", "broken")
    Fs.mkdirSync(skill, { recursive: true })
    Fs.writeFileSync(Path.join(skill, "SKILL.md"), "---\nname: broken\ndescription: Breaks\n---\n# Broken\n")
    Fs.mkdirSync(Path.join(dir, "skills", "custom", ".history", "broken.jsonl"), { recursive: true })
    const detail = await faultOf(await call(ADMIN, "/skills/custom/broken/history"))
    assert.strictEqual(detail, "The skill could not be read or written (see the server's log).")
    assert.lengthOf(loggedOf("custom skills: The history of 'broken' cannot be read"), 1, logs.logged.join("\n"))
  })

  it("an extensions_config.json that is not a JSON object: 500 naming the file, not where it is", async () => {
    Fs.writeFileSync(Path.join(dir, "extensions_config.json"), "[]")
    const detail = await faultOf(await call(ADMIN, "/mcp/config"))
    assert.strictEqual(detail, "extensions_config.json is not a JSON object (see the server's log).")
    assert.lengthOf(loggedOf("extensions endpoint: is not a JSON object"), 1, logs.logged.join("\n"))
  })
})
