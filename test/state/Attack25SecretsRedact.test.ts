/**
 * Attack round 25 on request secrets, the masks themselves: a secret said back encoded (base64, standard or URL-safe,
 * inside a longer base64 text at any byte alignment, padded or not; hex) reached the model and the thread; and a
 * streaming redactor that is never ended (an MCP server's stderr, read when its start fails) lost what it held back.
 */
import { assert, describe, it } from "@effect/vitest"
import * as FastCheck from "effect/FastCheck"
import * as Redact from "../../src/state/Redact.js"
import * as SkillSecrets from "../../src/services/SkillSecrets.js"
import { cutAt } from "../support/pieces.js"

const SECRET = "erp-tok-5c1e9a77-DO-NOT-LEAK"

type Encoding = "base64" | "base64-unpadded" | "base64url" | "base64url-padded" | "hex" | "HEX"

const encode = (bytes: Buffer, encoding: Encoding): string => {
  switch (encoding) {
    case "base64":
      return bytes.toString("base64")
    case "base64-unpadded":
      return bytes.toString("base64").replace(/=+$/, "")
    case "base64url":
      return bytes.toString("base64url")
    case "base64url-padded":
      return bytes.toString("base64").replace(/\+/g, "-").replace(/\//g, "_")
    case "hex":
      return bytes.toString("hex")
    case "HEX":
      return bytes.toString("hex").toUpperCase()
  }
}

const ENCODINGS: ReadonlyArray<Encoding> = ["base64", "base64-unpadded", "base64url", "base64url-padded", "hex", "HEX"]

/** The secret's bytes decode from a piece of `text` between markers, read from any character on. */
const recoverable = (text: string, encoding: Encoding, secret: string): boolean => {
  const wanted = Buffer.from(secret, "utf8")
  const hex = encoding === "hex" || encoding === "HEX"
  return text.split(Redact.MARKER).some((piece) =>
    [0, 1, 2, 3].some((from) => {
      const rest = piece.slice(from)
      const decoded = hex
        ? Buffer.from(rest.slice(0, rest.length - (rest.length % 2)), "hex")
        : Buffer.from(rest.replace(/-/g, "+").replace(/_/g, "/"), "base64")
      return decoded.includes(wanted)
    })
  )
}

const bytes = FastCheck.uint8Array({ maxLength: 40 }).map((array) => Buffer.from(array))
const secrets = FastCheck.string({ minLength: 8, maxLength: 40, unit: "grapheme" })

describe("Attack25: a request secret said back encoded", () => {
  it.prop(
    "is masked at any offset of a base64 or hex text of random bytes, by the run's redactor and by the tools' mask",
    { before: bytes, after: bytes, secret: secrets, encoding: FastCheck.constantFrom(...ENCODINGS) },
    ({ after, before, encoding, secret }) => {
      const text = encode(Buffer.concat([before, Buffer.from(secret, "utf8"), after]), encoding)
      const run = Redact.make([secret], { encoded: true })
      const masked = run.text(text)
      assert.include(masked, Redact.MARKER)
      assert.isFalse(recoverable(masked, encoding, secret), masked)
      const tool = SkillSecrets.mask(SkillSecrets.maskedTexts([secret]))(text)
      assert.include(tool, Redact.MARKER)
      assert.isFalse(recoverable(tool, encoding, secret), tool)
    },
    { fastCheck: { numRuns: 600 } }
  )

  it.prop(
    "leaves a base64 or hex text without it unchanged",
    { noise: bytes, encoding: FastCheck.constantFrom(...ENCODINGS) },
    ({ encoding, noise }) => {
      const text = encode(noise, encoding)
      assert.strictEqual(Redact.make([SECRET], { encoded: true }).text(text), text)
      assert.strictEqual(SkillSecrets.mask(SkillSecrets.maskedTexts([SECRET]))(text), text)
    },
    { fastCheck: { numRuns: 300 } }
  )

  it("is masked in a run's stream, its thread store's redactor (Redact.also) and a JSON value", () => {
    const run = Redact.also(Redact.none, [SECRET])
    const b64 = Buffer.from(`{"token":"${SECRET}"}`).toString("base64")
    const stream = run.stream()
    let shown = ""
    for (const piece of cutAt(`auth header ${b64} end`, [3, 17, 20, 29, 41])) shown += stream.push(piece)
    shown += stream.end()
    assert.notInclude(shown, Buffer.from(SECRET).toString("base64").slice(4, 20))
    assert.include(shown, Redact.MARKER)
    const value = run.value({ data: { hex: Buffer.from(SECRET).toString("hex") } })
    assert.deepStrictEqual(value, { data: { hex: Redact.MARKER } })
  })

  it("is not searched for encoded in the process's own redactor, nor for a secret shorter than 8 characters", () => {
    const b64 = Buffer.from(SECRET).toString("base64")
    assert.strictEqual(Redact.make([SECRET]).text(b64), b64)
    assert.deepStrictEqual(Redact.encodedForms("short"), [])
    const shortHex = Buffer.from("pw12345").toString("hex")
    assert.strictEqual(Redact.make(["pw12345"], { encoded: true }).text(shortHex), shortHex)
    assert.deepStrictEqual(SkillSecrets.maskedTexts(["pw12345"]), [])
  })
})

describe("Attack25: a streaming redactor that is read before it ends", () => {
  const redactor = Redact.make([SECRET, "hunter2-correct-horse"], { encoded: true })
  const fragment = FastCheck.oneof(
    FastCheck.constantFrom(SECRET, SECRET.slice(0, 5), SECRET.slice(0, 3), "http://u:p@h/v", "Bearer abcdefgh1234"),
    FastCheck.constantFrom(" ", "\n", ":", "db:5432", Buffer.from(SECRET).toString("base64")),
    FastCheck.string({ maxLength: 8 })
  )

  it.prop(
    "shows, pushed and peeked, exactly what the whole text's redactor shows, however it is cut; ending shows the same",
    { parts: FastCheck.array(fragment, { maxLength: 12 }), cuts: FastCheck.array(FastCheck.nat(), { maxLength: 10 }) },
    ({ cuts, parts }) => {
      const text = parts.join("")
      const stream = redactor.stream()
      let shown = ""
      for (const piece of cutAt(text, cuts)) shown += stream.push(piece)
      const peeked = stream.peek()
      assert.strictEqual(shown + peeked, redactor.last(text))
      assert.strictEqual(stream.end(), peeked)
      assert.notInclude(shown + peeked, SECRET)
      if (text.endsWith(SECRET.slice(0, 5))) assert.isTrue((shown + peeked).endsWith(Redact.MARKER))
    },
    { fastCheck: { numRuns: 500 } }
  )

  it("shows a held-back word at the end; hides a held-back beginning of a secret of 4 characters or more", () => {
    const stream = redactor.stream()
    assert.strictEqual(stream.push("cannot reach erp.internal:8443"), "cannot reach ")
    assert.strictEqual(stream.peek(), "erp.internal:8443")
    const cut = redactor.stream()
    assert.strictEqual(cut.push(`token ${SECRET.slice(0, 6)}`), "token ")
    assert.strictEqual(cut.peek(), Redact.MARKER)
    const three = redactor.stream()
    assert.strictEqual(three.push(`ends with ${SECRET.slice(0, 3)}`), "ends with ")
    assert.strictEqual(three.end(), SECRET.slice(0, 3))
  })

  it("a fork holds what its stream held and goes on alone; a chained (Redact.also) stream peeks the same", () => {
    const run = Redact.also(Redact.make(["hunter2-correct-horse"]), [SECRET])
    const stream = run.stream()
    assert.strictEqual(stream.push(`a ${SECRET.slice(0, 9)}`), "a ")
    const fork = stream.fork()
    assert.strictEqual(fork.push(`${SECRET.slice(9)} ok `), `${Redact.MARKER} ok `)
    assert.strictEqual(stream.peek(), Redact.MARKER)
    assert.strictEqual(stream.push("xyz "), `${SECRET.slice(0, 9)}xyz `)
  })
})
