/**
 * DeerFlow's custom skill endpoints, declared (`backend/app/gateway/routers/skills.py`, its paths and shapes):
 * the custom skills listed, one's SKILL.md read, replaced or deleted, its history listed, and a version restored
 * (`rollback`). The skills directory is read by every user's agent, so everything but the list is an admin's, as
 * in DeerFlow: an admin token or the open gateway on loopback (its local user); other tokens get 403. The
 * history is the one `skill_manage` writes (`CustomSkills`). Implemented in `handlers/CustomSkills.ts`.
 */
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as OpenApi from "@effect/platform/OpenApi"
import * as Schema from "effect/Schema"
import { SkillObject } from "./Extensions.js"
import { refusal } from "./Problem.js"
import { Authentication } from "./Security.js"
import { BodyRefusals, JsonRecord } from "./Threads.js"

/** The path of one custom skill. */
export const SkillPath = Schema.Struct({ skill_name: Schema.String })

/** The custom skills (DeerFlow's `SkillsListResponse`). */
export const CustomSkillList = Schema.Struct({ skills: Schema.Array(SkillObject) })
  .annotations({ identifier: "CustomSkillList" })

/** A custom skill with its SKILL.md (DeerFlow's `CustomSkillContentResponse`). */
export const CustomSkillContent = Schema.Struct({
  ...SkillObject.fields,
  content: Schema.String.annotations({ description: "The SKILL.md" })
}).annotations({ identifier: "CustomSkillContent" })

/** `PUT /skills/custom/{skill_name}`: the new SKILL.md. */
export const CustomSkillUpdate = Schema.Struct({ content: Schema.String })

/** The answer to a deletion. */
export const Deleted = Schema.Struct({ success: Schema.Boolean })

/** A skill's history, oldest first (DeerFlow's `CustomSkillHistoryResponse`). */
export const CustomSkillHistory = Schema.Struct({
  history: Schema.Array(JsonRecord.annotations({
    description: "ts, action (create, edit, patch, delete, write_file, remove_file, human_edit, human_delete, " +
      "rollback), author (agent, human), thread_id, file_path, prev_content, new_content, rollback_from_ts"
  }))
}).annotations({ identifier: "CustomSkillHistory" })

/** `POST /skills/custom/{skill_name}/rollback` (DeerFlow's `SkillRollbackRequest`). */
export const SkillRollback = Schema.Struct({
  history_index: Schema.optionalWith(Schema.Number.pipe(Schema.int()), { default: () => -1 }).annotations({
    description: "The history entry whose previous SKILL.md is restored (negative: from the end; default -1, the " +
      "latest change)"
  })
})

const AdminOnly = refusal(403, "A token that is not an admin's (the skills directory is every user's)")
const NotFound = refusal(404, "No custom skill of that name (with no history either)")
const Refused = refusal(400, "A SKILL.md that does not declare this skill, too large, or a built-in skill's name")

/** The custom skills group (served under `/api`). */
export const group = HttpApiGroup.make("customSkills")
  .add(
    HttpApiEndpoint.get("listCustomSkills", "/skills/custom")
      .addSuccess(CustomSkillList)
      .annotate(OpenApi.Summary, "The custom skills (under custom/ of the skills directory)")
  )
  .add(
    HttpApiEndpoint.get("getCustomSkill", "/skills/custom/:skill_name")
      .setPath(SkillPath)
      .addSuccess(CustomSkillContent)
      .addError(NotFound)
      .addError(AdminOnly)
      .annotate(OpenApi.Summary, "A custom skill with its SKILL.md")
  )
  .add(
    HttpApiEndpoint.put("putCustomSkill", "/skills/custom/:skill_name")
      .setPath(SkillPath)
      .setPayload(CustomSkillUpdate)
      .addSuccess(CustomSkillContent)
      .addError(BodyRefusals)
      .addError(Refused)
      .addError(NotFound)
      .addError(AdminOnly)
      .annotate(OpenApi.Summary, "Replace a custom skill's SKILL.md (kept in its history)")
  )
  .add(
    HttpApiEndpoint.del("deleteCustomSkill", "/skills/custom/:skill_name")
      .setPath(SkillPath)
      .addSuccess(Deleted)
      .addError(Refused)
      .addError(NotFound)
      .addError(AdminOnly)
      .annotate(OpenApi.Summary, "Delete a custom skill (its history stays: it can be rolled back)")
  )
  .add(
    HttpApiEndpoint.get("getCustomSkillHistory", "/skills/custom/:skill_name/history")
      .setPath(SkillPath)
      .addSuccess(CustomSkillHistory)
      .addError(NotFound)
      .addError(AdminOnly)
      .annotate(OpenApi.Summary, "A custom skill's history, oldest first")
  )
  .add(
    HttpApiEndpoint.post("rollbackCustomSkill", "/skills/custom/:skill_name/rollback")
      .setPath(SkillPath)
      .setPayload(SkillRollback)
      .addSuccess(CustomSkillContent)
      .addError(BodyRefusals)
      .addError(refusal(400, "No history, an index out of range, or an entry with no SKILL.md to restore"))
      .addError(NotFound)
      .addError(AdminOnly)
      .annotate(OpenApi.Summary, "Restore the SKILL.md a history entry replaced (kept in the history)")
  )
  .middlewareEndpoints(Authentication)
  .annotate(OpenApi.Description, "Custom skills with their history (DeerFlow's custom skill endpoints)")
