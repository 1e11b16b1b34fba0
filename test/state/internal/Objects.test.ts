import { assert, describe, it } from "@effect/vitest"
import * as FC from "effect/FastCheck"
import { extend } from "../../../src/state/internal/Objects.js"

describe("Objects.extend", () => {
  it("is the object spread: the same own keys in the same order, later fields win, the source is untouched", () => {
    const record = FC.dictionary(FC.constantFrom("a", "b", "type", "id", "additional_kwargs", "update"), FC.anything())
    FC.assert(FC.property(record, record, (object, fields) => {
      const before = JSON.stringify(Object.entries(object))
      const out = extend(object, fields)
      const spread = { ...object, ...fields }
      assert.deepStrictEqual(Object.keys(out), Object.keys(spread))
      // (the same value: Object.is, as NaN is not === NaN)
      for (const key of Object.keys(spread)) assert.isTrue(Object.is((out as any)[key], (spread as any)[key]), key)
      assert.strictEqual(JSON.stringify(Object.entries(object)), before)
      assert.notStrictEqual(out, object)
    }))
  })

  it("copies own enumerable properties only, as the spread does", () => {
    const proto = { inherited: 1 }
    const object = Object.create(proto, { own: { value: 2, enumerable: true }, hidden: { value: 3, enumerable: false } })
    assert.deepStrictEqual(extend(object, { added: 4 }), { own: 2, added: 4 })
  })
})
