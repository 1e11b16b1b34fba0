/**
 * Which skills bind secrets in a subagent's run (`SkillSecrets.sourcesOf` with `delegated` and `slashByModel`): the
 * skills its parent had bound for the `task` call, by name, when the catalog still has them enabled and the
 * subagent's allowlist allows them; a skill slash-activated in its task (which the parent's model wrote) only when it
 * does not say `secrets-autonomous: false`.
 */
import { assert, describe, it } from "@effect/vitest"
import * as SkillSecrets from "../../src/services/SkillSecrets.js"
import { catalogOf, skill } from "../support/skillCatalog.js"

const given = new Map([["ERP_TOKEN", "tok-123-long-enough"], ["CRM_TOKEN", "tok-crm-long-enough"]])
const envOf = (sources: ReadonlyArray<SkillSecrets.Source>) => SkillSecrets.bind(sources, given).env

describe("a subagent's secret sources", () => {
  it("the parent's bound skills bind by name, if enabled and allowed; unknown names bind nothing", () => {
    const erp = skill("erp-report")
    const crm = skill("crm-sync", { requiredSecrets: [{ name: "CRM_TOKEN", optional: false }] })
    const delegated = ["erp-report", "crm-sync", "gone"]
    assert.deepStrictEqual(
      envOf(SkillSecrets.sourcesOf(undefined, [], catalogOf(erp, crm), undefined, { delegated })),
      { ERP_TOKEN: "tok-123-long-enough", CRM_TOKEN: "tok-crm-long-enough" }
    )
    // the subagent's allowlist limits them
    assert.deepStrictEqual(
      envOf(SkillSecrets.sourcesOf(undefined, [], catalogOf(erp, crm), ["crm-sync"], { delegated })),
      { CRM_TOKEN: "tok-crm-long-enough" }
    )
    // disabled since: none
    const off = skill("erp-report", { enabled: false })
    assert.deepStrictEqual(envOf(SkillSecrets.sourcesOf(undefined, [], catalogOf(off), undefined, { delegated })), {})
    // no catalog (it could not be read): none
    assert.deepStrictEqual(envOf(SkillSecrets.sourcesOf(undefined, [], undefined, undefined, { delegated })), {})
    // none delegated: none
    assert.deepStrictEqual(envOf(SkillSecrets.sourcesOf(undefined, [], catalogOf(erp), undefined, {})), {})
  })

  it("a slash activation the model wrote binds only an autonomous skill", () => {
    const sealed = skill("sealed-report", { secretsAutonomous: false })
    assert.deepStrictEqual(envOf(SkillSecrets.sourcesOf(sealed, [], undefined, undefined, { slashByModel: true })), {})
    assert.deepStrictEqual(
      envOf(SkillSecrets.sourcesOf(skill("erp-report"), [], undefined, undefined, { slashByModel: true })),
      { ERP_TOKEN: "tok-123-long-enough" }
    )
    // the user's slash (the lead's) binds it
    assert.deepStrictEqual(envOf(SkillSecrets.sourcesOf(sealed, [], undefined, undefined)), {
      ERP_TOKEN: "tok-123-long-enough"
    })
  })
})
