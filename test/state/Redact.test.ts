import { assert, describe, it } from "@effect/vitest"
import * as FastCheck from "effect/FastCheck"
import * as Redacted from "effect/Redacted"
import * as Redact from "../../src/state/Redact.js"
import { cutAt } from "../support/pieces.js"

const KEY = "sk-live-4f9a8b7c6d5e"
const PASSWORD = "hunter2-correct-horse"

describe("Redact.make", () => {
  const redactor = Redact.make([KEY, Redacted.make(PASSWORD), "short", undefined, null, ""])

  it("hides configured secrets, URL credentials and bearer tokens; short secrets are not searched for", () => {
    assert.deepStrictEqual(redactor.secrets, [PASSWORD, KEY])
    assert.strictEqual(
      redactor.text(`401: Incorrect API key provided: Bearer ${KEY}. Try again.`),
      "401: Incorrect API key provided: Bearer [redacted]. Try again."
    )
    assert.strictEqual(redactor.text(`key=${KEY}&x=1`), "key=[redacted]&x=1")
    assert.strictEqual(
      redactor.text("could not reach http://user:pass@10.0.0.1:8000/v1/chat"),
      "could not reach http://[redacted]@10.0.0.1:8000/v1/chat"
    )
    assert.strictEqual(redactor.text(`the password is ${PASSWORD}`), "the password is [redacted]")
    assert.strictEqual(redactor.text("Authorization: Basic dXNlcjpwYXNzd29yZA=="), "Authorization: Basic [redacted]")
    // tokens glued together: each one is hidden (the first must not swallow the next one's scheme)
    assert.strictEqual(
      redactor.text("Bearer abcdefgh12345Bearer abcdefgh12345Basic  zyxwvuts98765"),
      "Bearer [redacted]Bearer [redacted]Basic  [redacted]"
    )
    // "short" is too short to hide; nothing else changes.
    const plain = "a short text, mailto:x@y.z, https://host/a@b"
    assert.strictEqual(redactor.text(plain), plain)
    assert.isTrue(redactor.test(`x ${KEY}`))
    assert.isFalse(redactor.test("nothing here"))
  })

  it("finds the parts of a URL's credentials, so an echo of the password alone is hidden too", () => {
    assert.deepStrictEqual(Redact.urlSecrets("http://admin:s3cr%40t-pass@host/v1"), [
      "admin",
      "s3cr%40t-pass",
      "s3cr@t-pass"
    ])
    assert.deepStrictEqual(Redact.urlSecrets("http://host/v1"), [])
    assert.deepStrictEqual(Redact.urlSecrets("not a url"), [])
    const fromUrl = Redact.make(Redact.urlSecrets("http://admin:s3cr%40t-pass@host/v1"))
    assert.strictEqual(fromUrl.text("denied for s3cr@t-pass"), "denied for [redacted]")
    assert.strictEqual(Redact.url("see https://a:b@h/x and http://h/y"), "see https://[redacted]@h/x and http://h/y")
  })

  it("redacts every string in a JSON-like value, returning the same value when nothing changed", () => {
    const clean = { a: ["x", { b: 1 }], c: null }
    assert.strictEqual(redactor.value(clean), clean)
    const dirty = { a: ["x", { b: `Bearer ${KEY}` }], c: KEY, d: 3 }
    const out = redactor.value(dirty)
    assert.deepStrictEqual(out, { a: ["x", { b: "Bearer [redacted]" }], c: "[redacted]", d: 3 })
    assert.strictEqual(out.a[0], dirty.a[0])
    assert.strictEqual(dirty.c, KEY, "the input is not changed")
  })

  // Text made of words, secrets, URLs with credentials and bearer tokens, cut anywhere into deltas.
  const fragment = FastCheck.oneof(
    FastCheck.constantFrom(KEY, PASSWORD, "http://user:pass@host/v1", "Bearer abcdefgh12345", " ", "\n", ":", "@"),
    FastCheck.string({ maxLength: 8 })
  )

  it.prop(
    "a stream lets through exactly the redacted text, however it is split: no secret survives a split",
    { parts: FastCheck.array(fragment, { maxLength: 12 }), cuts: FastCheck.array(FastCheck.nat(), { maxLength: 10 }) },
    ({ cuts, parts }) => {
      const text = parts.join("")
      const stream = redactor.stream()
      let shown = ""
      for (const piece of cutAt(text, cuts)) shown += stream.push(piece)
      shown += stream.end()
      assert.strictEqual(shown, redactor.last(text))
      assert.notInclude(shown, KEY)
      assert.notInclude(shown, PASSWORD)
      assert.notInclude(shown, "user:pass@")
    },
    { fastCheck: { numRuns: 500 } }
  )

  it("a stream shows plain words as they come and holds back only what may still become a secret", () => {
    const stream = redactor.stream()
    assert.strictEqual(stream.push("Hel"), "Hel")
    assert.strictEqual(stream.push("lo "), "lo ")
    assert.strictEqual(stream.push("sk-li"), "")
    assert.strictEqual(stream.push("ve-4f9a8b7c6d5e and"), "[redacted] and")
    assert.strictEqual(stream.push(" http://us"), " ")
    assert.strictEqual(stream.push("er:pw@host"), "")
    assert.strictEqual(stream.end(), "http://[redacted]@host")
  })
})

describe("Redact.namedSecrets", () => {
  it("gives the texts under secret-named keys at any depth, in snake, kebab or camel case; none of other keys", () => {
    const body = {
      api_key: "a1",
      nested: [{ "access-token": "a2" }, { clientSecret: "a3", password: "a4" }],
      auth: { apiKey: "a5", credentials: "a6", private_key: "a7" },
      max_tokens: "n1",
      maxTokens: "n2",
      monkey: "n3",
      cache_key: "n4",
      region: "n5",
      count: 3
    }
    assert.deepStrictEqual([...Redact.namedSecrets(body)].sort(), ["a1", "a2", "a3", "a4", "a5", "a6", "a7"])
    assert.deepStrictEqual(Redact.namedSecrets(null), [])
    assert.deepStrictEqual(Redact.namedSecrets("api_key"), [])
  })
})

describe("Redact.controls", () => {
  it("makes terminal escape sequences visible: clipboard, title, clear screen, links, bell, 8-bit CSI, bidi", () => {
    const hostile = "a\x1b]52;c;ZXZpbA==\x07b\x1b]0;pwned\x07c\x1b[2Jd" +
      "\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\e\x9b31mf\u202eg\r\n"
    const shown = Redact.controls(hostile)
    assert.strictEqual(
      shown,
      "a␛]52;c;ZXZpbA==␇b␛]0;pwned␇c␛[2Jd␛]8;;http://x␛\\link␛]8;;␛\\e\\u009b31mf\\u202eg\n"
    )
    assert.strictEqual(Redact.controls("tabs\tand\nnewlines stay"), "tabs\tand\nnewlines stay")
  })

  it.prop(
    "leaves no control character but tab and newline, and works character by character",
    { a: FastCheck.string({ unit: "binary" }), b: FastCheck.string({ unit: "binary" }) },
    ({ a, b }) => {
      const out = Redact.controls(a + b)
      assert.strictEqual(out, Redact.controls(a) + Redact.controls(b))
      assert.notMatch(out, /[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]/)
    }
  )

  it("escapes in JSON text the controls JSON.stringify leaves raw, keeping the same JSON", () => {
    const value = { text: "\x9b2J\u202e\x7f\u2028" }
    const json = Redact.jsonControls(JSON.stringify(value))
    assert.notMatch(json, /[\x7f-\x9f\u2028\u202e]/)
    assert.deepStrictEqual(JSON.parse(json), value)
  })
})

describe("Redact.growingOf", () => {
  // `antler serve` hands one growing redactor to its logs and its gateway: what the gateway learns later (the MCP
  // servers' secrets, an edit's new keys) must be hidden from the logs too, so the gateway teaches that one
  it("is the growing redactor it is given (what either holder learns, both hide), else a new one", () => {
    const logs = Redact.growing(Redact.make(["sk-start-0123456789"]))
    const gateway = Redact.growingOf(logs)
    assert.strictEqual(gateway, logs)
    gateway.learn(["sk-learned-later-0123456789"])
    assert.notInclude(logs.text("key sk-learned-later-0123456789"), "sk-learned-later")
    const plain = Redact.make(["sk-start-0123456789"])
    const wrapped = Redact.growingOf(plain)
    wrapped.learn(["sk-other-0123456789abc"])
    assert.notInclude(wrapped.text("sk-other-0123456789abc"), "sk-other")
    assert.include(plain.text("sk-other-0123456789abc"), "sk-other")
  })
})
