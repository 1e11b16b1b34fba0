/**
 * DeerFlow's custom skill edit when SkillScan blocks it (`routers/skills.py` `_static_scan_http_detail`): a 400 whose
 * `detail` is an object, `{message, skill_name, findings}`, the findings as SkillScan gives them (rule, severity,
 * file, line, message, remediation, evidence; a secret never repeated), and nothing written.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Fs from "node:fs"
import * as Path from "node:path"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const CAROL = "carol-token-scan-0123456789ab"
const FIRST = "---\nname: notes\ndescription: Notes\n---\n# Notes\nStep one.\n"
const KEY = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAAzzqq\n-----END OPENSSH PRIVATE KEY-----\n"

let gateway: TestGateway
let dir = ""
const skillFile = () => Path.join(dir, "skills", "custom", "notes", "SKILL.md")

beforeAll(async () => {
  dir = Support.tempDir("antler-df27-skill-scan-")
  Fs.mkdirSync(Path.dirname(skillFile()), { recursive: true })
  Fs.writeFileSync(skillFile(), FIRST)
  gateway = await Support.start({
    script: () => "ok",
    file: Path.join(dir, "config.yaml"),
    config: { gateway: { auth: { tokens: [{ token: CAROL, user: "carol", admin: true }] } } }
  })
})
afterAll(() => gateway?.stop())

const put = (content: string) =>
  fetch(`${gateway.url}/api/skills/custom/notes`, {
    method: "PUT",
    headers: { authorization: `Bearer ${CAROL}`, "content-type": "application/json" },
    body: JSON.stringify({ content })
  })

describe("DeerFlow's custom skill edit blocked by SkillScan", () => {
  it("is a 400 whose detail is {message, skill_name, findings}; the skill is unchanged", async () => {
    const response = await put(`${FIRST}${KEY}`)
    const text = await response.text()
    assert.strictEqual(response.status, 400, text)
    assert.notInclude(text, "b3BlbnNzaC1rZXktdjEAAAAAzzqq", "the key is never repeated")
    const detail = JSON.parse(text).detail
    assert.deepStrictEqual(Object.keys(detail).sort(), ["findings", "message", "skill_name"])
    assert.strictEqual(detail.skill_name, "notes")
    assert.match(detail.message, /^Static security scan blocked skill 'notes': secret-private-key \(CRITICAL\) at SKILL\.md:7/)
    assert.isAbove(detail.findings.length, 0)
    const [finding] = detail.findings
    assert.deepStrictEqual(Object.keys(finding).sort(), [
      "evidence", "file", "line", "message", "remediation", "rule_id", "severity"
    ])
    assert.deepStrictEqual([finding.rule_id, finding.severity, finding.file, finding.line], [
      "secret-private-key", "CRITICAL", "SKILL.md", 7
    ])
    assert.isTrue(detail.findings.every((f: any) => f.severity === "CRITICAL"), "only the blocking findings")
    assert.strictEqual(Fs.readFileSync(skillFile(), "utf8"), FIRST)
    // a refusal that is not SkillScan's keeps its text detail
    const other = await put("no front matter")
    assert.strictEqual(other.status, 400)
    assert.isString(((await other.json()) as any).detail)
  })
})
