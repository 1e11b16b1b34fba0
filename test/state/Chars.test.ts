/**
 * Cutting text for the model never leaves half an emoji (a lone surrogate, which a provider may refuse): the
 * cuts of the modules that bound text the model reads, each given text full of emoji at every length.
 */
import { assert, describe, it } from "@effect/vitest"
import * as FC from "effect/FastCheck"
import { clean } from "../../src/layers/SearchProviders.js"
import { truncate } from "../../src/middleware/SandboxAudit.js"
import { stamped } from "../../src/middleware/SkillContext.js"
import * as Chars from "../../src/state/Chars.js"
import * as M from "../../src/state/Message.js"

const LONE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/
const text = FC.array(FC.constantFrom("a", "😀", "é", " ", "中"), { minLength: 1, maxLength: 1200 })
  .map((xs) => xs.join(""))

describe("Chars", () => {
  it.prop("a head or a cut at any index keeps whole characters", [text, FC.nat(1300)], ([value, at]) => {
    assert.notMatch(Chars.headChars(value, at), LONE)
    assert.isAtMost([...Chars.headChars(value, at)].length, at)
    const back = Chars.cutAt(value, Math.min(at, value.length), "back")
    const forward = Chars.cutAt(value, Math.min(at, value.length), "forward")
    assert.notMatch(value.slice(0, back), LONE)
    assert.notMatch(value.slice(forward), LONE)
  })

  it.prop("search results, audit records and a stamped skill description are cut on characters", [
    text,
    FC.integer({ min: 2, max: 300 })
  ], ([value, max]) => {
    assert.notMatch(clean(value, max), LONE)
    assert.notMatch(truncate(value, max), LONE)
    const read = M.tool("body", "call_1", {
      name: "read_file",
      additional_kwargs: { skill_context_entry: { path: "/mnt/skills/public/x/SKILL.md", description: value } }
    })
    assert.notMatch(stamped(read)!.description, LONE)
  })

  it.prop("a clipped text is whole when it has at most `max` characters, else `max - 1` of them and \"…\"", [
    text,
    FC.integer({ min: 1, max: 1300 })
  ], ([value, max]) => {
    const clipped = Chars.clipChars(value, max)
    const length = [...value].length
    assert.notMatch(clipped, LONE)
    if (length <= max) assert.strictEqual(clipped, value)
    else {
      assert.strictEqual(clipped, [...value].slice(0, max - 1).join("") + "…")
      assert.strictEqual([...clipped].length, max)
    }
  })
})
