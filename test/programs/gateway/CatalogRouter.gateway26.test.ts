/**
 * DeerFlow's models and skills routers as its app and clients read them (test_models_authorization,
 * test_skills_router_authz), through the gateway: `GET /api/models` answers `token_usage.enabled` (the app shows
 * token usage only when it is true) and each model's `description`; `GET /api/models/{name}` answers one model,
 * 404 `Model '<name>' not found` for none, and, with `authorization`, 403 `Model '<name>' is not available for your
 * role` for one the caller's role may not use (test_get_model_*); `GET /api/skills/{name}` answers one skill to any
 * user, 404 `Skill '<name>' not found` for none (test_basic_skill_listing_stays_open_to_normal_users). A provider that
 * fails on models lists none and refuses each under `fail_closed`, and lists and answers them all without it
 * (test_list_models_provider_error_fail_closed_vs_open, test_get_model_provider_error_fail_closed_vs_open); the
 * gateway starts though the default agent cannot be built then, and refuses the runs (422).
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Requests from "../../support/requests.js"
import { rbac } from "../../support/rbac.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const GUEST = "guest-token-gateway26-catalog0"

// (a provider whose every decision on a model fails; the routes' are allowed)
const FAILING = `
export class Broken {
  authorize(request) {
    if (request.resource === "model") throw new Error("policy store unreachable")
    return { allow: true }
  }
  filter_resources(principal, type, names) {
    if (type === "model") throw new Error("policy store unreachable")
    return names
  }
}
`

let open: TestGateway
let roles: TestGateway
const alice = Requests.as(() => open, Support.ALICE)
const roleAlice = Requests.as(() => roles, Support.ALICE)
const roleGuest = Requests.as(() => roles, GUEST)

beforeAll(async () => {
  const dir = Support.tempDir("antler-gw26-catalog-")
  Fs.mkdirSync(Path.join(dir, "skills", "public", "demo-skill"), { recursive: true })
  Fs.writeFileSync(
    Path.join(dir, "skills", "public", "demo-skill", "SKILL.md"),
    "---\nname: demo-skill\ndescription: Shows how skills work\nlicense: MIT\n---\n# Demo\n"
  )
  open = await Support.start({
    script: () => "ok",
    source: Path.join(dir, "config.yaml"),
    config: (url) => ({
      models: [
        { ...Support.scriptedModel("scripted", url), display_name: "Scripted", description: "Answers from a script" },
        Support.scriptedModel("deep", url)
      ],
      token_usage: { enabled: false },
      gateway: { heartbeat_seconds: 1, auth: { tokens: [{ token: Support.ALICE, user: "alice" }] } }
    })
  })
  roles = await Support.start({
    script: () => "ok",
    config: (url) => ({
      models: [Support.scriptedModel("scripted", url), Support.scriptedModel("deep", url)],
      gateway: {
        heartbeat_seconds: 1,
        auth: { tokens: [{ token: Support.ALICE, user: "alice" }, { token: GUEST, user: "gus", role: "guest" }] }
      },
      authorization: rbac({ user: {}, guest: { models: { allow: ["scripted"] } } })
    })
  })
})
afterAll(async () => {
  await open?.stop()
  await roles?.stop()
})

describe("DeerFlow's models router", () => {
  it("lists the models with their description, and whether token usage is shown", async () => {
    const listed = await alice("GET", "/api/models")
    assert.strictEqual(listed.status, 200, listed.text)
    assert.deepStrictEqual(listed.json().token_usage, { enabled: false })
    const [scripted, deep] = listed.json().models
    assert.strictEqual(scripted.description, "Answers from a script")
    assert.strictEqual(scripted.display_name, "Scripted")
    assert.isNull(deep.description)
    assert.deepStrictEqual((await roleAlice("GET", "/api/models")).json().token_usage, { enabled: true })
  })

  it("answers one model by its name, and 404 for a name none has", async () => {
    const one = await alice("GET", "/api/models/scripted")
    assert.strictEqual(one.status, 200, one.text)
    assert.deepStrictEqual(one.json(), {
      name: "scripted",
      model: "model-scripted",
      display_name: "Scripted",
      description: "Answers from a script",
      supports_thinking: false,
      supports_reasoning_effort: false,
      supports_vision: false
    })
    const none = await alice("GET", "/api/models/ghost")
    assert.strictEqual(none.status, 404, none.text)
    assert.strictEqual(none.json().detail, "Model 'ghost' not found")
  })

  it("with authorization, a model the role may not use is a 403; one it may, a 200", async () => {
    const refused = await roleGuest("GET", "/api/models/deep")
    assert.strictEqual(refused.status, 403, refused.text)
    assert.strictEqual(refused.json().detail, "Model 'deep' is not available for your role")
    assert.strictEqual((await roleGuest("GET", "/api/models/scripted")).json().name, "scripted")
    assert.strictEqual((await roleAlice("GET", "/api/models/deep")).json().name, "deep")
    // an unknown model is a 404 whatever the role
    assert.strictEqual((await roleGuest("GET", "/api/models/ghost")).status, 404)
  })
})

describe("DeerFlow's models router, its authorization provider failing", () => {
  const gateways: Array<TestGateway> = []
  afterAll(async () => {
    for (const gateway of gateways) await gateway.stop()
  })
  const failing = async (failClosed: boolean) => {
    const dir = Support.tempDir("antler-gw26-failing-")
    Fs.writeFileSync(Path.join(dir, "broken.mjs"), FAILING)
    const gateway = await Support.start({
      script: () => "ok",
      source: Path.join(dir, "config.yaml"),
      config: (url) => ({
        models: [Support.scriptedModel("scripted", url), Support.scriptedModel("deep", url)],
        gateway: { heartbeat_seconds: 1, auth: { tokens: [{ token: Support.ALICE, user: "alice" }] } },
        authorization: { enabled: true, fail_closed: failClosed, provider: { use: "./broken.mjs:Broken" } }
      })
    })
    gateways.push(gateway)
    return Requests.as(() => gateway, Support.ALICE)
  }

  // (under fail_closed the default agent cannot be built when the gateway starts: it starts all the same, as
  // DeerFlow's, which builds no agent then; its runs are refused)
  it("fail_closed: no model listed, each refused (403); fail open: all listed and answered", async () => {
    const closed = await failing(true)
    const none = await closed("GET", "/api/models")
    assert.strictEqual(none.status, 200, none.text)
    assert.deepStrictEqual(none.json().models, [])
    const refused = await closed("GET", "/api/models/deep")
    assert.strictEqual(refused.status, 403, refused.text)
    assert.strictEqual(refused.json().detail, "Model 'deep' is not available for your role")
    const run = await closed("POST", "/api/runs/wait", { assistant_id: "lead_agent", input: Support.userInput("hi") })
    assert.strictEqual(run.status, 422, run.text)
    assert.include(run.json().detail, "No models are authorized")
    const opened = await failing(false)
    const all = (await opened("GET", "/api/models")).json().models.map((m: { name: string }) => m.name)
    assert.deepStrictEqual(all, ["scripted", "deep"])
    assert.strictEqual((await opened("GET", "/api/models/deep")).status, 200)
  })
})

describe("DeerFlow's skills router", () => {
  it("answers one skill to a user who is not an admin, and 404 for a name none has", async () => {
    const one = await alice("GET", "/api/skills/demo-skill")
    assert.strictEqual(one.status, 200, one.text)
    assert.deepStrictEqual(one.json(), {
      name: "demo-skill",
      description: "Shows how skills work",
      license: "MIT",
      category: "public",
      enabled: true,
      editable: false
    })
    const none = await alice("GET", "/api/skills/nope")
    assert.strictEqual(none.status, 404, none.text)
    assert.strictEqual(none.json().detail, "Skill 'nope' not found")
    // the custom skills' list is still its own route
    assert.strictEqual((await alice("GET", "/api/skills/custom")).status, 200)
  })
})
