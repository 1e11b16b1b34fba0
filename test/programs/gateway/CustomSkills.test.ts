/**
 * Custom skills with their history through the gateway (DeerFlow's `routers/skills.py`: GET /api/skills/custom,
 * GET/PUT/DELETE /api/skills/custom/{name}, GET .../history, POST .../rollback), with `skill_evolution` on: an
 * admin's run (Carol's token) creates and edits a skill with `skill_manage`; a person reads its history, edits it,
 * rolls it back to a version, deletes it and brings it back. The skills directory is every user's: Alice's token
 * (not an admin's) lists the skills but neither reads a skill's content or history nor changes it (403), and her
 * runs are not offered `skill_manage` at all. Real HTTP through the gateway, the SCRIPTED model.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Fs from "node:fs"
import * as Path from "node:path"
import type { ChatRequestBody, Turn } from "../../../src/layers/ScriptedChatServer.js"
import { messageText, toolNames } from "../../support/modelRequests.js"
import * as Requests from "../../support/requests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const ALICE = "alice-token-0123456789abcdef"
const CAROL = "carol-token-0123456789abcdef"

const V1 = "---\nname: csv-cleanup\ndescription: Cleans CSV files (first draft)\n---\n# CSV cleanup\n1. Read it.\n"
const V2 = "---\nname: csv-cleanup\ndescription: Cleans CSV files, quoting fixed\n---\n# CSV cleanup\n2. Quote.\n"
const V3 = "---\nname: csv-cleanup\ndescription: Cleans CSV files, by hand\n---\n# CSV cleanup\n3. By hand.\n"

const textOf = messageText

const script = (body: ChatRequestBody): Turn => {
  const user = textOf(body.messages.filter((m) => m.role === "user").at(-1)!)
  const step = body.messages.filter((m) => m.role === "assistant").length
  if (!user.includes("Learn from this")) return "ok"
  const manage = (id: string, action: string, content: string): Turn => ({
    toolCalls: [{ id, name: "skill_manage", arguments: { action, name: "csv-cleanup", content } }]
  })
  const steps: ReadonlyArray<Turn> = [manage("c1", "create", V1), manage("c2", "edit", V2)]
  return steps[step] ?? "Saved."
}

let gateway: TestGateway
let dir: string
const skillFile = () => Path.join(dir, "skills", "custom", "csv-cleanup", "SKILL.md")

beforeAll(async () => {
  dir = Support.tempDir("antler-custom-skills-")
  Fs.mkdirSync(Path.join(dir, "skills", "public", "demo"), { recursive: true })
  Fs.writeFileSync(
    Path.join(dir, "skills", "public", "demo", "SKILL.md"),
    "---\nname: demo\ndescription: A built-in skill\n---\n# Demo\n"
  )
  gateway = await Support.start({
    script,
    source: Path.join(dir, "config.yaml"),
    config: {
      skill_evolution: { enabled: true },
      gateway: {
        heartbeat_seconds: 1,
        auth: { tokens: [{ token: ALICE, user: "alice" }, { token: CAROL, user: "carol", admin: true }] }
      }
    }
  })
})
afterAll(async () => {
  await gateway?.stop()
})

const call = Requests.api(() => gateway)

const ok = Requests.ok

const refused = async (response: Response, status: number, detail: string) => {
  const body: any = await response.json()
  assert.strictEqual(response.status, status, JSON.stringify(body))
  assert.include(body.detail, detail)
}

const run = async (token: string, content: string) => {
  const before = gateway.scripted.requests.length
  const response = await call(token, "/runs/wait", {
    method: "POST",
    body: { assistant_id: "lead-agent", input: { messages: [{ role: "user", content }] } }
  })
  assert.strictEqual(response.status, 200, await response.text())
  return gateway.scripted.requests.slice(before)
}

describe("custom skills through the gateway", () => {
  it("a non-admin's run is not offered skill_manage and changes nothing", async () => {
    const requests = await run(ALICE, "Learn from this task")
    assert.notInclude(toolNames(requests[0]!), "skill_manage")
    assert.notInclude(textOf(requests[0]!.messages[0]!), "Skill Self-Evolution")
    assert.isFalse(Fs.existsSync(skillFile()))
  })

  it("an admin's run creates and edits a skill; its history lists both, the list shows it", async () => {
    const requests = await run(CAROL, "Learn from this task")
    assert.include(toolNames(requests[0]!), "skill_manage")
    assert.strictEqual(Fs.readFileSync(skillFile(), "utf8"), V2)

    const history = (await ok(await call(CAROL, "/skills/custom/csv-cleanup/history"))).history
    assert.deepStrictEqual(history.map((r: any) => [r.action, r.author, r.prev_content, r.new_content]), [
      ["create", "agent", null, V1],
      ["edit", "agent", V1, V2]
    ])
    assert.isString(history[0].thread_id)

    for (const token of [ALICE, CAROL]) {
      const list = await ok(await call(token, "/skills/custom"))
      assert.deepStrictEqual(list.skills, [{
        name: "csv-cleanup",
        description: "Cleans CSV files, quoting fixed",
        category: "custom",
        license: null,
        enabled: true,
        editable: true
      }])
    }
    const skill = await ok(await call(CAROL, "/skills/custom/csv-cleanup"))
    assert.strictEqual(skill.content, V2)
    assert.strictEqual(skill.editable, true)
  })

  it("is an admin's: another token cannot read a skill's content or history, nor change it (403)", async () => {
    const attempts: ReadonlyArray<readonly [string, string, unknown]> = [
      ["GET", "/skills/custom/csv-cleanup", undefined],
      ["PUT", "/skills/custom/csv-cleanup", { content: V3 }],
      ["DELETE", "/skills/custom/csv-cleanup", undefined],
      ["GET", "/skills/custom/csv-cleanup/history", undefined],
      ["POST", "/skills/custom/csv-cleanup/rollback", { history_index: 0 }]
    ]
    for (const [method, path, body] of attempts) {
      await refused(await call(ALICE, path, { method, body }), 403, "Admin privileges required")
    }
    assert.strictEqual(Fs.readFileSync(skillFile(), "utf8"), V2)
  })

  it("edits by hand, rolls back to a version, deletes, and rolls the deletion back", async () => {
    const edited = await ok(await call(CAROL, "/skills/custom/csv-cleanup", { method: "PUT", body: { content: V3 } }))
    assert.strictEqual(edited.content, V3)
    assert.strictEqual(edited.description, "Cleans CSV files, by hand")

    // the latest change undone (DeerFlow's default history_index -1): the agent's version is back
    const undone = await ok(await call(CAROL, "/skills/custom/csv-cleanup/rollback", { method: "POST", body: {} }))
    assert.strictEqual(undone.content, V2)
    // an older version: what the agent's edit replaced (entry 1)
    const first = await ok(
      await call(CAROL, "/skills/custom/csv-cleanup/rollback", { method: "POST", body: { history_index: 1 } })
    )
    assert.strictEqual(first.content, V1)
    assert.strictEqual(Fs.readFileSync(skillFile(), "utf8"), V1)

    let history = (await ok(await call(CAROL, "/skills/custom/csv-cleanup/history"))).history
    assert.deepStrictEqual(history.map((r: any) => [r.action, r.author]), [
      ["create", "agent"],
      ["edit", "agent"],
      ["human_edit", "human"],
      ["rollback", "human"],
      ["rollback", "human"]
    ])
    assert.deepStrictEqual([history[3].prev_content, history[3].new_content], [V3, V2])
    assert.strictEqual(history[3].rollback_from_ts, history[2].ts)
    assert.strictEqual(history[4].rollback_from_ts, history[1].ts)

    // deleted: gone from the list, its history kept, and a rollback brings it back
    assert.deepStrictEqual(
      await ok(await call(CAROL, "/skills/custom/csv-cleanup", { method: "DELETE" })),
      { success: true }
    )
    assert.isFalse(Fs.existsSync(Path.dirname(skillFile())))
    await refused(await call(CAROL, "/skills/custom/csv-cleanup"), 404, "not found")
    assert.deepStrictEqual((await ok(await call(CAROL, "/skills/custom"))).skills, [])
    history = (await ok(await call(CAROL, "/skills/custom/csv-cleanup/history"))).history
    assert.deepStrictEqual(history.at(-1).action, "human_delete")
    const back = await ok(await call(CAROL, "/skills/custom/csv-cleanup/rollback", { method: "POST", body: {} }))
    assert.strictEqual(back.content, V1)

    // the next run lists the skill as it is now
    const requests = await run(CAROL, "hello")
    assert.match(
      textOf(requests[0]!.messages[0]!),
      /<name>csv-cleanup<\/name>\s*<description>Cleans CSV files \(first draft\)/
    )
  })

  it("refuses what is not a skill, an unknown skill, a built-in one and a bad index, and writes nothing", async () => {
    const before = Fs.readFileSync(skillFile(), "utf8")
    const historyBefore = (await ok(await call(CAROL, "/skills/custom/csv-cleanup/history"))).history.length
    await refused(
      await call(CAROL, "/skills/custom/csv-cleanup", { method: "PUT", body: { content: "no front matter" } }),
      400,
      "SKILL.md does not declare a skill"
    )
    await refused(
      await call(CAROL, "/skills/custom/csv-cleanup", {
        method: "PUT",
        body: { content: V3.replace("csv-cleanup", "x") }
      }),
      400,
      "must match requested skill name 'csv-cleanup'"
    )
    await refused(
      await call(CAROL, "/skills/custom/csv-cleanup", {
        method: "PUT",
        body: { content: `${V3}${"x".repeat(600 * 1024)}` }
      }),
      400,
      "at most 512 KiB"
    )
    await refused(
      await call(CAROL, "/skills/custom/csv-cleanup/rollback", { method: "POST", body: { history_index: 99 } }),
      400,
      "history_index is out of range"
    )
    // an entry without a previous version (the creation)
    await refused(
      await call(CAROL, "/skills/custom/csv-cleanup/rollback", { method: "POST", body: { history_index: 0 } }),
      400,
      "no previous content"
    )
    await refused(await call(CAROL, "/skills/custom/nothing-here/history"), 404, "not found")
    await refused(
      await call(CAROL, "/skills/custom/nothing-here/rollback", { method: "POST", body: {} }),
      404,
      "not found"
    )
    await refused(await call(CAROL, "/skills/custom/demo", { method: "PUT", body: { content: V3 } }), 400, "built-in")
    for (const name of ["..%2Fpublic%2Fdemo", "..", "Bad_Name"]) {
      const response = await call(CAROL, `/skills/custom/${name}`, { method: "PUT", body: { content: V3 } })
      assert.oneOf(response.status, [400, 404], name)
    }
    assert.strictEqual(Fs.readFileSync(skillFile(), "utf8"), before)
    assert.strictEqual(
      (await ok(await call(CAROL, "/skills/custom/csv-cleanup/history"))).history.length,
      historyBefore
    )
    assert.strictEqual(
      Fs.readFileSync(Path.join(dir, "skills", "public", "demo", "SKILL.md"), "utf8"),
      "---\nname: demo\ndescription: A built-in skill\n---\n# Demo\n"
    )
  })
})

describe("the open gateway (no tokens, loopback only)", () => {
  it("lets its local user edit skills by hand, but its runs are not an admin's: no skill_manage", async () => {
    const home = Support.tempDir("antler-custom-open-")
    Fs.mkdirSync(Path.join(home, "skills", "custom", "csv-cleanup"), { recursive: true })
    Fs.writeFileSync(Path.join(home, "skills", "custom", "csv-cleanup", "SKILL.md"), V1)
    const open = await Support.start({
      script,
      source: Path.join(home, "config.yaml"),
      config: { skill_evolution: { enabled: true } }
    })
    try {
      const send = (path: string, init: { method?: string; body?: unknown } = {}) =>
        fetch(`${open.url}/api${path}`, {
          method: init.method ?? "GET",
          headers: { "content-type": "application/json" },
          ...(init.body === undefined ? {} : { body: JSON.stringify(init.body) })
        })
      const edited = await ok(await send("/skills/custom/csv-cleanup", { method: "PUT", body: { content: V2 } }))
      assert.strictEqual(edited.content, V2)
      const history = (await ok(await send("/skills/custom/csv-cleanup/history"))).history
      assert.deepStrictEqual(history.map((r: any) => [r.action, r.author, r.prev_content]), [
        ["human_edit", "human", V1]
      ])

      const before = open.scripted.requests.length
      const run = await send("/runs/wait", {
        method: "POST",
        body: { assistant_id: "lead-agent", input: { messages: [{ role: "user", content: "Learn from this task" }] } }
      })
      assert.strictEqual(run.status, 200, await run.text())
      assert.notInclude(toolNames(open.scripted.requests[before]!), "skill_manage")
      assert.strictEqual(Fs.readFileSync(Path.join(home, "skills", "custom", "csv-cleanup", "SKILL.md"), "utf8"), V2)
    } finally {
      await open.stop()
    }
  })
})
