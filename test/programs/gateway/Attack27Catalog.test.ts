/**
 * Attack round 27 on the catalog routes `GET /api/models/{name}` and `GET /api/skills/{name}` as another gateway user
 * (held): a model's answer names no credential or address (`api_key`, `base_url`), a name that walks out of a folder
 * or is odd is only a name none has (404, echoed as JSON text), and a skill is looked up by name, never read from a
 * path.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Requests from "../../support/requests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const SLOW = 120_000
let gateway: TestGateway
const bob = Requests.as(() => gateway, Support.BOB)

beforeAll(async () => {
  gateway = await Support.start({
    script: () => "ok",
    config: (url) => ({
      models: [{ ...Support.scriptedModel("scripted", `${url.replace("://", "://user:pw-a27-secret@")}`) }],
      gateway: Support.twoUsers
    })
  })
}, SLOW)
afterAll(() => gateway?.stop())

describe("Attack27: the catalog routes (held)", () => {
  it("a model's answer holds no key, address or URL credential", async () => {
    for (const path of ["/api/models", "/api/models/scripted"]) {
      const answer = await bob("GET", path)
      assert.strictEqual(answer.status, 200, answer.text)
      assert.include(answer.text, "model-scripted")
      for (const hidden of ["sk-test-scripted-key", "pw-a27-secret", "127.0.0.1", "base_url", "api_key"]) {
        assert.notInclude(answer.text, hidden, path)
      }
    }
  }, SLOW)

  it("odd names are names none has: 404, nothing read", async () => {
    for (const name of ["..%2F..%2Fconfig.yaml", "%2Fetc%2Fpasswd", "scripted%00", "x".repeat(2000)]) {
      for (const route of ["models", "skills"]) {
        const answer = await bob("GET", `/api/${route}/${name}`)
        assert.strictEqual(answer.status, 404, `${route}/${name.slice(0, 40)}: ${answer.text.slice(0, 200)}`)
        assert.notInclude(answer.text, "root:")
        assert.isBelow(answer.text.length, 4200)
      }
    }
  }, SLOW)
})
