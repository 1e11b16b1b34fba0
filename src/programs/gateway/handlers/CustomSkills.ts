/**
 * The custom skill endpoints (declared in `api/CustomSkills.ts`): DeerFlow's list, read, edit, delete, history
 * and rollback of the skills under `custom/`, over the store `skill_manage` writes (`CustomSkills`), so that
 * what the agent changed can be read, corrected and undone by a person. Every change made here is kept in the
 * skill's history as a person's (`author: "human"`, DeerFlow's `human_edit`, `human_delete`, `rollback`).
 *
 * The skills directory is every user's, so only an admin token or the open loopback gateway (the local user's)
 * reads a skill's content and history or changes it (403 otherwise, DeerFlow's answer to a non-admin); the list
 * is everyone's, as `GET /api/skills` is. A SKILL.md sent is checked as the agent's are: at most
 * `CustomSkills.MAX_FILE_BYTES`, front matter declaring this skill; refused with 400 naming the problem.
 */
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import type * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Effect from "effect/Effect"
import * as SkillsDirectory from "../../../layers/SkillsDirectory.js"
import { AppConfigService } from "../../../services/AppConfig.js"
import * as CustomSkills from "../../CustomSkills.js"
import * as Api from "../api/CustomSkills.js"
import type { DeerFlowApi } from "../api/GatewayApi.js"
import { fail, type GatewayError, problemWithDetail, serverFault } from "../api/Problem.js"
import { CurrentIdentity } from "../api/Security.js"
import * as Body from "../Body.js"
import { skillObject } from "./Catalog.js"
import { json } from "./Http.js"
import * as Live from "./Live.js"

/** Options of `layer`. */
export interface Options {
  /**
   * Whether the gateway is open: no tokens and no accounts (the loopback gateway, whose local user may change the
   * skills). With accounts, anyone may register one: only an admin account may.
   */
  readonly open: boolean
}

/** A store error as the gateway answers it. */
const refused = (error: CustomSkills.CustomSkillError) => {
  switch (error.reason) {
    case "invalid":
    case "read_only":
      return Effect.fail(fail("bad_request", error.message))
    case "not_found":
      return Effect.fail(fail("not_found", error.message))
    case "exists":
      return Effect.fail(fail("conflict", error.message))
    case "io":
      return serverFault("The skill could not be read or written", `custom skills: ${error.message}`, error.cause)
  }
}

/**
 * A write of skill `name` that passes through the store: one SkillScan blocked is DeerFlow's 400 whose `detail` is
 * `{message, skill_name, findings}` (`_static_scan_http_detail`); any other refusal as `refused`.
 */
const written = <A, R>(
  name: string,
  write: Effect.Effect<A, CustomSkills.CustomSkillError, R>,
  then: Effect.Effect<HttpServerResponse.HttpServerResponse, GatewayError>
) =>
  Effect.matchEffect(write, {
    onFailure: (error) =>
      error.findings === undefined
        ? refused(error)
        : Effect.succeed(
          problemWithDetail(400, { message: error.message, skill_name: name, findings: error.findings })
        ),
    onSuccess: () => then
  })

/** The custom skill endpoints of `api` (DeerFlow's, under `/api`). */
export const layer = (api: DeerFlowApi, options: Options) =>
  HttpApiBuilder.group(api, "customSkills", (handlers) =>
    Effect.gen(function*() {
      const app = yield* AppConfigService
      const current = yield* Live.config
      // the store as `config.yaml` is at the request (an edit the gateway took: `skill_scan`)
      const store = Effect.map(current, CustomSkills.of)
      const human: CustomSkills.Author = { author: "human" }

      const adminOnly = Effect.flatMap(CurrentIdentity, (identity) =>
        identity.admin || options.open
          ? Effect.void
          : Effect.fail(fail("forbidden", "Admin privileges required to manage skills.")))

      /** Path names come from a URL: line breaks dropped, as DeerFlow does, then checked by the store. */
      const nameOf = (raw: string) => raw.replace(/[\r\n]/g, "")

      /** The custom skill `name` with its SKILL.md, as the catalog finds it now. */
      const content = (name: string) =>
        Effect.gen(function*() {
          const skill = SkillsDirectory.catalogOf(app).skills.find((s) => s.name === name && s.category === "custom")
          if (skill === undefined) return yield* fail("not_found", `Custom skill '${name}' not found`)
          const text = yield* Effect.catchAll((yield* store).read(name), refused)
          return json(Api.CustomSkillContent, { ...skillObject(skill), content: text })
        })

      return handlers
        .handleRaw("listCustomSkills", () =>
          Effect.sync(() =>
            json(Api.CustomSkillList, {
              skills: SkillsDirectory.catalogOf(app).skills.filter((s) => s.category === "custom").map(skillObject)
            })
          ))
        .handleRaw("getCustomSkill", ({ path }) =>
          Effect.zipRight(adminOnly, content(nameOf(path.skill_name))))
        .handleRaw("putCustomSkill", ({ path }) =>
          Effect.gen(function*() {
            yield* adminOnly
            const request = yield* Body.json(Api.CustomSkillUpdate)
            const name = nameOf(path.skill_name)
            return yield* written(name, (yield* store).edit(name, request.content, human, "human_edit"), content(name))
          }))
        .handleRaw("deleteCustomSkill", ({ path }) =>
          Effect.gen(function*() {
            yield* adminOnly
            yield* Effect.catchAll((yield* store).remove(nameOf(path.skill_name), human, "human_delete"), refused)
            return json(Api.Deleted, { success: true })
          }))
        .handleRaw("getCustomSkillHistory", ({ path }) =>
          Effect.gen(function*() {
            yield* adminOnly
            const name = nameOf(path.skill_name)
            const s = (yield* store)
            if (!s.exists(name) && !s.hasHistory(name)) {
              return yield* fail("not_found", `Custom skill '${name}' not found`)
            }
            const history = yield* Effect.catchAll(s.history(name), refused)
            return json(Api.CustomSkillHistory, { history: history.map((record) => ({ ...record })) })
          }))
        .handleRaw("rollbackCustomSkill", ({ path }) =>
          Effect.gen(function*() {
            yield* adminOnly
            const request = yield* Body.json(Api.SkillRollback)
            const name = nameOf(path.skill_name)
            const s = (yield* store)
            if (!s.exists(name) && !s.hasHistory(name)) {
              return yield* fail("not_found", `Custom skill '${name}' not found`)
            }
            return yield* written(name, s.rollback(name, request.history_index, human), content(name))
          }))
    }))
