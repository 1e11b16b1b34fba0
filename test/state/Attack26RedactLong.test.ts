/**
 * Attack round 26 on the redactor's pattern: a secret whose masked form is long (a request secret's hex, twice its
 * UTF-8 bytes; a value's URL-encoded form, up to three times them; a configured key of many symbols) is searched for
 * alone, never in the one pattern of the others (`Redact.MAX_PATTERN_TEXT`): JavaScript refused a pattern holding an
 * alternative of 32,768 characters or more, so every text that might hold a secret failed to be masked, with an error
 * quoting the pattern (the secrets, whole). And a request's values may hold at most `SkillSecrets.MAX_MASKED_LINES`
 * lines to mask alone, the refusal naming the field.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Either from "effect/Either"
import * as FastCheck from "effect/FastCheck"
import * as Redact from "../../src/state/Redact.js"
import * as SkillSecrets from "../../src/services/SkillSecrets.js"
import { cutAt } from "../support/pieces.js"

const decoded = (values: Record<string, string>) => {
  const secrets = SkillSecrets.decodeRequest(values, "context.secrets")
  assert.isTrue(Either.isRight(secrets), JSON.stringify(Either.isLeft(secrets) ? secrets.left : ""))
  return Either.getOrThrow(secrets)
}

/** A 16 KiB token (its hex: 32 KiB), and 6,000 CJK characters (18,000 bytes). */
const TOKEN = ("tok16k-" + "Zq9xW3vB".repeat(2048)).slice(0, SkillSecrets.MAX_VALUE_CHARS)
const CJK = "鍵秘密CJK" + "鍵".repeat(5_994)

describe("Attack26: long masked forms", () => {
  for (const [what, value] of [["a 16 KiB token", TOKEN], ["6,000 CJK characters", CJK]] as const) {
    it(`${what}: each form is masked in a text, a value and a stream, whatever the cuts`, () => {
      const redact = SkillSecrets.runRedactor(Redact.none, decoded({ ERP_TOKEN: value }))
      const forms = [
        value,
        encodeURIComponent(value),
        Buffer.from(value).toString("hex"),
        Buffer.from(value).toString("hex").toUpperCase(),
        Buffer.from(value).toString("base64"),
        Buffer.from(value).toString("base64url")
      ]
      assert.isTrue(forms.some((form) => form.length >= 32_768), "a form past the engine's bound on an alternative")
      for (const form of forms) {
        const text = `see https://erp.example/x?t=${form} and Bearer abcdefgh12345678 end`
        assert.strictEqual(redact.text(text), "see https://erp.example/x?t=[redacted] and Bearer [redacted] end")
        assert.deepStrictEqual(redact.value({ said: [text] }), { said: [redact.text(text)] })
      }
      FastCheck.assert(
        FastCheck.property(FastCheck.integer({ min: 0, max: forms.length - 1 }), FastCheck.array(FastCheck.nat()), (
          i,
          cuts
        ) => {
          const text = `a ${forms[i]} b https://u:p@h/ c ${forms[i]}`
          const stream = redact.stream()
          const out = cutAt(text, cuts).map((piece) => stream.push(piece)).join("") + stream.end()
          return out === redact.text(text) && out === "a [redacted] b https://[redacted]@h/ c [redacted]"
        }),
        { numRuns: 40 }
      )
    })
  }

  it("a stream given a long secret's beginning as a long word ending like `Bearer`'s start holds it back", () => {
    // (a word past 4,096 characters that may still become a credential was held back to its last characters, as many
    // as the longest secret's form: past the word's own start, the cut fell before the text and let all but its end
    // through, the secret's beginning with it)
    const value = ("tok5k-" + "Zq9xW3vB".repeat(700)).slice(0, 5_000)
    const at = value.lastIndexOf("B", 4_500) + 1
    assert.isAbove(at, 4_096)
    const redact = SkillSecrets.runRedactor(Redact.none, decoded({ ERP_TOKEN: value }))
    const stream = redact.stream()
    const lead = "y".repeat(3_000)
    const first = stream.push(`see ${lead}${value.slice(0, at)}`)
    assert.notInclude(first, "tok5k-")
    assert.strictEqual(first + stream.push(`${value.slice(at)} end`) + stream.end(), `see ${lead}[redacted] end`)
  })

  it("a configured secret whose URL-encoded form is past the bound masks, never throws", () => {
    const key = "#".repeat(11_000) + "-configured-key"
    const redact = Redact.make([key])
    assert.isAbove(encodeURIComponent(key).length, 32_768)
    assert.strictEqual(
      redact.text(`x https://h/?k=${encodeURIComponent(key)} y ${key}`),
      "x https://h/?k=[redacted] y [redacted]"
    )
  })

  it("short and long secrets together: a long one holding a short one is masked whole", () => {
    const short = "short-secret-1"
    const long = `head-${"L".repeat(300)}-${short}-tail`
    const redact = Redact.make([short, long])
    assert.strictEqual(redact.text(`a ${long} b ${short} c`), "a [redacted] b [redacted] c")
  })
})

describe("Attack26: the lines a request's secrets may hold", () => {
  const lines = (n: number) => Array.from({ length: n }, (_, i) => `line-${String(i).padStart(4, "0")}`).join("\n")

  it(`${SkillSecrets.MAX_MASKED_LINES} lines are taken; one more is refused, naming the field and the bound`, () => {
    decoded({ KEY: lines(SkillSecrets.MAX_MASKED_LINES) })
    decoded({ A: lines(SkillSecrets.MAX_MASKED_LINES / 2), B: lines(SkillSecrets.MAX_MASKED_LINES / 2) })
    const refused = SkillSecrets.decodeRequest(
      { A: lines(SkillSecrets.MAX_MASKED_LINES / 2), B: lines(SkillSecrets.MAX_MASKED_LINES / 2 + 1) },
      "context.secrets"
    )
    assert.deepStrictEqual(
      refused,
      Either.left(
        `context.secrets holds ${SkillSecrets.MAX_MASKED_LINES + 1} lines of 8 characters or more; at most ` +
          `${SkillSecrets.MAX_MASKED_LINES} are accepted (each is masked alone in everything the run says)`
      )
    )
  })

  it("lines too short to be masked alone do not count", () => {
    decoded({ KEY: Array.from({ length: 2_000 }, () => "short").join("\n") })
  })
})
