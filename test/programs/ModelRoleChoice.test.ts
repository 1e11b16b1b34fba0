/**
 * `AgentAuthorization.allowedModel`, the one choice every model call made for a user goes through: the model wanted
 * when the role may use it, else the first configured model (the default first) the role may see and use; with
 * none, `No models are authorized for the current role.` under `fail_closed`, the model wanted otherwise.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as Rbac from "../../src/layers/RbacAuthorization.js"
import * as AgentAuthorization from "../../src/programs/AgentAuthorization.js"
import * as Authz from "../../src/services/Authorization.js"
import { AuthorizationConfig } from "../../src/services/config/Authorization.js"
import { rbac } from "../support/rbac.js"

const authzOf = (failClosed: boolean) =>
  Rbac.fromConfig(Schema.decodeUnknownSync(AuthorizationConfig)(rbac({
    user: {},
    guest: { models: { allow: ["small", "mid"] } },
    hidden: { models: { deny: ["deep", "small"] } },
    mute: { models: { allow: false } }
  }, { fail_closed: failClosed })))!

const MODELS = ["deep", "small", "mid"]
const choose = (role: string, wanted: string, failClosed = true) =>
  AgentAuthorization.allowedModel(
    authzOf(failClosed),
    Authz.principalOf({ userId: "u1", role }, "user"),
    MODELS,
    wanted
  )

describe("the model a role may use for a call", () => {
  it.effect("the one wanted when allowed; else the first configured one allowed, in the configuration's order", () =>
    Effect.gen(function*() {
      assert.strictEqual(yield* choose("user", "deep"), "deep")
      assert.strictEqual(yield* choose("guest", "mid"), "mid")
      assert.strictEqual(yield* choose("guest", "deep"), "small")
      assert.strictEqual(yield* choose("hidden", "deep"), "mid")
    }))

  it.effect("none allowed: refused with the runs' sentence under fail_closed; the one wanted otherwise", () =>
    Effect.gen(function*() {
      assert.strictEqual((yield* Effect.flip(choose("mute", "deep"))).message, AgentAuthorization.NO_MODEL)
      assert.strictEqual(yield* choose("mute", "deep", false), "deep")
      // an unknown role: the provider cannot decide, which fail_closed denies
      assert.strictEqual((yield* Effect.flip(choose("stranger", "deep"))).message, AgentAuthorization.NO_MODEL)
    }))
})
