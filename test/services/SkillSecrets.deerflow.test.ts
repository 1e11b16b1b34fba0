/**
 * The rules of request-scoped secrets for skills, as DeerFlow's `test_skill_request_scoped_secrets.py` states them:
 * a SKILL.md's `required-secrets` and `secrets-autonomous` as a skill found on disk has them (TestRequiredSecrets-
 * Parsing, TestSecretsAutonomousParsing), which skills bind which names (TestActivationBindsSecrets,
 * TestInContextBindsSecrets), and the mask of what a command prints (TestLeakSurfaces' stdout cases).
 */
import { assert, describe, it } from "@effect/vitest"
import * as Either from "effect/Either"
import * as Redacted from "effect/Redacted"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as SkillsDirectory from "../../src/layers/SkillsDirectory.js"
import * as SkillSecrets from "../../src/services/SkillSecrets.js"
import { catalogOf, skill } from "../support/skillCatalog.js"

const parsed = (frontMatter: string) => SkillsDirectory.parseSkill(`---\n${frontMatter}\n---\n# body\n`)
const BASE = "name: erp-report\ndescription: Pull an ERP report"

describe("required-secrets in a SKILL.md", () => {
  it("absent: none; a list of names: each required", () => {
    const none = parsed(BASE)
    assert.isTrue(none.ok && none.requiredSecrets === undefined)
    const listed = parsed(`${BASE}\nrequired-secrets:\n  - ERP_TOKEN\n  - OTHER_TOKEN`)
    assert.deepStrictEqual(listed.ok ? listed.requiredSecrets : undefined, [
      { name: "ERP_TOKEN", optional: false },
      { name: "OTHER_TOKEN", optional: false }
    ])
  })

  it("mappings with optional; an entry without a valid or safe name is dropped, the skill kept", () => {
    const skill = parsed(
      `${BASE}\nrequired-secrets:\n  - name: ERP_TOKEN\n    optional: true\n  - name: REQUIRED_ONE\n  - "bad name!"` +
        "\n  - 42\n  - ERP_TOKEN\n  - LD_PRELOAD\n  - BASH_ENV"
    )
    assert.isTrue(skill.ok)
    if (!skill.ok) return
    assert.deepStrictEqual(skill.requiredSecrets, [
      { name: "ERP_TOKEN", optional: true },
      { name: "REQUIRED_ONE", optional: false }
    ])
    assert.deepStrictEqual(skill.droppedSecrets, ["\"bad name!\"", "42", "\"LD_PRELOAD\"", "\"BASH_ENV\""])
  })

  it("not a list: the skill is rejected, saying why", () => {
    assert.deepStrictEqual(parsed(`${BASE}\nrequired-secrets: ERP_TOKEN`), {
      ok: false,
      problem: "`required-secrets` must be a list"
    })
  })

  it("secrets-autonomous: true by default, false as written, anything else fails closed to false", () => {
    const of = (extra: string) => {
      const skill = parsed(`${BASE}\nrequired-secrets: [ERP_TOKEN]\n${extra}`)
      return skill.ok ? skill.secretsAutonomous !== false : undefined
    }
    assert.isTrue(of(""))
    assert.isTrue(of("secrets-autonomous: true"))
    assert.isFalse(of("secrets-autonomous: false"))
    assert.isFalse(of("secrets-autonomous: \"yes please\""))
  })

  it("a skills directory lists them, and warns of a dropped entry", () => {
    const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "antler-skill-secrets-"))
    Fs.mkdirSync(Path.join(dir, "custom", "erp-report"), { recursive: true })
    Fs.writeFileSync(
      Path.join(dir, "custom", "erp-report", "SKILL.md"),
      `---\n${BASE}\nrequired-secrets:\n  - ERP_TOKEN\n  - "no good"\nsecrets-autonomous: false\n---\n# body\n`
    )
    const catalog = SkillsDirectory.discover(dir, { container: "/mnt/skills" })
    assert.deepStrictEqual(catalog.skills[0]!.requiredSecrets, [{ name: "ERP_TOKEN", optional: false }])
    assert.isFalse(catalog.skills[0]!.secretsAutonomous)
    assert.strictEqual(catalog.warnings.length, 1)
    assert.include(catalog.warnings[0]!, "\"no good\"")
  })
})

const given = new Map([["ERP_TOKEN", "tok-123-long-enough"], ["UNUSED", "x"]])
const envOf = (sources: ReadonlyArray<SkillSecrets.Source>, secrets = given) => SkillSecrets.bind(sources, secrets).env

describe("which skills bind which secrets", () => {
  it("the slash-activated skill binds only what it declares, only what the request gives", () => {
    assert.deepStrictEqual(envOf(SkillSecrets.sourcesOf(skill("erp-report"), [], undefined, undefined)), {
      ERP_TOKEN: "tok-123-long-enough"
    })
    const plain = skill("plain", { requiredSecrets: [] })
    assert.deepStrictEqual(envOf(SkillSecrets.sourcesOf(plain, [], undefined, [])), {})
    const missing = SkillSecrets.bind(SkillSecrets.sourcesOf(skill("erp-report"), [], undefined, undefined), new Map())
    assert.deepStrictEqual(SkillSecrets.audit(missing), {
      skills: [],
      secrets: [],
      missing: { "erp-report": ["ERP_TOKEN"] }
    })
  })

  it("a loaded skill binds by its exact path when enabled, allowed and autonomous", () => {
    const erp = skill("erp-report")
    const loaded = [{ path: "/mnt/skills//custom/erp-report/./SKILL.md" }]
    assert.deepStrictEqual(envOf(SkillSecrets.sourcesOf(undefined, loaded, catalogOf(erp), undefined)), {
      ERP_TOKEN: "tok-123-long-enough"
    })
    for (const catalog of [catalogOf(skill("erp-report", { enabled: false })), catalogOf()]) {
      assert.deepStrictEqual(envOf(SkillSecrets.sourcesOf(undefined, loaded, catalog, undefined)), {})
    }
    assert.deepStrictEqual(envOf(SkillSecrets.sourcesOf(undefined, loaded, catalogOf(erp), ["other"])), {})
    const sealed = skill("erp-report", { secretsAutonomous: false })
    assert.deepStrictEqual(envOf(SkillSecrets.sourcesOf(undefined, loaded, catalogOf(sealed), undefined)), {})
    // (explicit activation is the ceremony `secrets-autonomous: false` keeps)
    assert.deepStrictEqual(envOf(SkillSecrets.sourcesOf(sealed, [], undefined, undefined)), {
      ERP_TOKEN: "tok-123-long-enough"
    })
    // a read of the public foo does not bind the custom foo that shadows it
    const custom = skill("foo")
    const publicFoo = [{ path: "/mnt/skills/public/foo/SKILL.md" }]
    assert.deepStrictEqual(envOf(SkillSecrets.sourcesOf(undefined, publicFoo, catalogOf(custom), undefined)), {})
  })

  it("slash and loaded skills bind together", () => {
    const crm = skill("crm-sync", { requiredSecrets: [{ name: "CRM_TOKEN", optional: false }] })
    const loaded = [{ path: skill("erp-report").location }]
    const both = envOf(
      SkillSecrets.sourcesOf(crm, loaded, catalogOf(skill("erp-report"), crm), undefined),
      new Map([["ERP_TOKEN", "tok-erp-000000"], ["CRM_TOKEN", "tok-crm-000000"]])
    )
    assert.deepStrictEqual(both, { ERP_TOKEN: "tok-erp-000000", CRM_TOKEN: "tok-crm-000000" })
  })
})

describe("a request's secrets and the mask", () => {
  it("decodes a mapping of names to text, held redacted", () => {
    const decoded = SkillSecrets.decodeRequest({ ERP_TOKEN: "tok" }, "context.secrets")
    assert.isTrue(Either.isRight(decoded))
    const secrets = Either.getOrThrow(decoded)!
    assert.strictEqual(String(secrets), "<redacted>")
    assert.notInclude(JSON.stringify({ secrets }), "tok")
    assert.deepStrictEqual([...Redacted.value(secrets)], [["ERP_TOKEN", "tok"]])
    assert.deepStrictEqual(SkillSecrets.decodeRequest(null, "context.secrets"), Either.right(undefined))
    assert.deepStrictEqual(SkillSecrets.decodeRequest({}, "context.secrets"), Either.right(undefined))
  })

  it("masks values of 8 characters or more, longest first; shorter ones are left alone", () => {
    const long = "sk-erp-long-enough-token-value"
    const texts = SkillSecrets.maskedTexts([long, "42", "sk-erp-long"])
    const masked = SkillSecrets.mask(texts)(`token=${long} rows: 42 ${"sk-erp-long"}`)
    assert.strictEqual(masked, "token=[redacted] rows: 42 [redacted]")
    // a value of several lines is masked whole, and line by line (output is masked a line at a time)
    const pem = "-----BEGIN KEY-----\nAAAABBBBCCCCDDDD\n-----END KEY-----"
    assert.strictEqual(SkillSecrets.mask(SkillSecrets.maskedTexts([pem]))("x AAAABBBBCCCCDDDD y"), "x [redacted] y")
  })
})
