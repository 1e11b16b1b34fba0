import { assert, describe, it } from "@effect/vitest"
import * as FastCheck from "effect/FastCheck"
import * as Lookalike from "../../src/state/Lookalike.js"
import * as Markup from "../../src/state/Markup.js"
import { assertContained, forgedClosers, occurrences } from "../support/markup.js"

/** Tags the harness wraps untrusted text in (protocol names, kept as DeerFlow spells them). */
const TAGS = [
  "memory",
  "current_uploads",
  "uploaded_files",
  "durable_context_data",
  "system_reminder",
  "system-reminder",
  "current_date",
  "skill_content",
  "user_request",
  "soul",
  "new_messages",
  "conversation"
]

/** Strings built to break out: closing tags of every harness tag, look-alikes, entities, noise. */
const hostile = FastCheck.array(
  FastCheck.oneof(
    FastCheck.constantFrom(...TAGS).map((tag) => `</${tag}>`),
    FastCheck.constantFrom(...TAGS).map((tag) => `\uFF1C/${tag}\uFF1E`),
    FastCheck.constantFrom(...TAGS).map((tag) => `\uFE64/${tag}\uFE65`),
    FastCheck.constantFrom(...TAGS).map((tag) => `\u2039 \u200B/${tag}\u203A`),
    FastCheck.constantFrom("<", ">", "/", "&lt;", "&amp;", "&", "\"", "\n", "\r", "\u200B", " "),
    FastCheck.string({ maxLength: 6 }),
    FastCheck.string({ unit: "grapheme", maxLength: 4 })
  ),
  { maxLength: 24 }
).map((parts) => parts.join(""))

describe("Markup", () => {
  it("escapes angle brackets, their compatibility forms, ampersands, and look-alikes that open a closing tag", () => {
    assert.strictEqual(Markup.escapeText("a < b && c > d"), "a &lt; b &amp;&amp; c &gt; d")
    assert.strictEqual(Markup.escapeText("\uFF1C/memory\uFF1E \uFE64x\uFE65"), "&lt;/memory&gt; &lt;x&gt;")
    assert.strictEqual(Markup.escapeText("\u2039/memory\u203A \u2039 \u200B/x"), "&lt;/memory\u203A &lt; \u200B/x")
    // Ordinary text keeps its look: quotes, French quotes, CJK brackets not before a slash.
    const ordinary = "\"hi\" \u2039mot\u203A \u3008book\u3009"
    assert.strictEqual(Markup.escapeText(ordinary), ordinary)
    assert.strictEqual(Markup.escapeAttribute("a \"b\" <c>"), "a &quot;b&quot; &lt;c&gt;")
  })

  it("a block holds forged closing tags and instructions inside it", () => {
    const text = Markup.block("memory", forgedClosers("memory"))
    assert.isTrue(text.startsWith("<memory>\n"))
    assertContained(text, "memory")
  })

  it.prop(
    "for any string s, wrapping s in a block yields one closing tag, at the end, and nothing inside reads as a tag",
    [
      FastCheck.constantFrom(...TAGS),
      FastCheck.oneof(hostile, FastCheck.string(), FastCheck.string({ unit: "binary" }))
    ],
    ([tag, s]) => {
      const text = Markup.block(tag, s)
      assert.strictEqual(occurrences(text, `</${tag}>`), 1)
      assert.isTrue(text.endsWith(`</${tag}>`))
      const inside = text.slice(`<${tag}>\n`.length, text.length - `\n</${tag}>`.length)
      assert.notInclude(Lookalike.fold(inside).text, "<")
    },
    { fastCheck: { numRuns: 500 } }
  )
})
