import { assert, describe, it } from "@effect/vitest"
import * as FastCheck from "effect/FastCheck"
import * as M from "../../src/state/Message.js"

const allIds = (message: M.AIMessage) => [
  ...M.toolCalls(message).map((call) => call.id),
  ...(message.invalid_tool_calls ?? []).map((call, i) => M.invalidCallId(message, call, i))
]

describe("Message.uniqueToolCallIds", () => {
  it("renames repeats and blanks, keeps first ids, and skips ids already taken", () => {
    const message = M.ai("", {
      id: "m1",
      tool_calls: [
        { id: "call_1", name: "a", args: {} },
        { id: "call_1", name: "b", args: {} },
        { id: "", name: "c", args: {} },
        { id: "call_1_2", name: "d", args: {} }
      ],
      invalid_tool_calls: [
        { id: "call_1", name: "e", args: "{", error: "bad" },
        { id: null, name: "f", args: "{", error: "bad" }
      ]
    })
    const unique = M.uniqueToolCallIds(message)
    assert.deepStrictEqual(unique.tool_calls?.map((c) => [c.id, c.name]), [
      ["call_1", "a"],
      ["call_1_3", "b"],
      ["m1_call_2", "c"],
      ["call_1_2", "d"]
    ])
    assert.deepStrictEqual(unique.invalid_tool_calls?.map((c) => [c.id, c.name]), [
      ["call_1_4", "e"],
      ["m1_invalid_1", "f"]
    ])
    assert.strictEqual(message.tool_calls?.[1]?.id, "call_1", "the input is not changed")
  })

  it("returns the same message when the ids are already unique", () => {
    const message = M.ai("", {
      tool_calls: [{ id: "a", name: "x", args: {} }, { id: "b", name: "x", args: {} }],
      invalid_tool_calls: [{ id: null, name: "x", args: null, error: null }]
    })
    assert.strictEqual(M.uniqueToolCallIds(message), message)
    const plain = M.ai("hi")
    assert.strictEqual(M.uniqueToolCallIds(plain), plain)
  })

  const id = FastCheck.oneof(
    FastCheck.constantFrom("c", "c", "c_2", "", "m_call_0", "m_invalid_0"),
    FastCheck.string({ maxLength: 3 })
  )
  it.prop(
    "every call ends up with its own non-empty id; the first of each id keeps it; applying it again changes nothing",
    {
      calls: FastCheck.array(id, { maxLength: 8 }),
      invalid: FastCheck.array(FastCheck.option(id, { nil: null }), { maxLength: 4 })
    },
    ({ calls, invalid }) => {
      const message = M.ai("", {
        id: "m",
        tool_calls: calls.map((callId, i) => ({ id: callId, name: `t${i}`, args: {} })),
        invalid_tool_calls: invalid.map((callId, i) => ({ id: callId, name: `i${i}`, args: "{", error: "bad" }))
      })
      const unique = M.uniqueToolCallIds(message)
      const ids = allIds(unique)
      assert.strictEqual(new Set(ids).size, ids.length)
      assert.isTrue(ids.every((x) => x !== ""))
      assert.deepStrictEqual(unique.tool_calls?.map((c) => c.name), message.tool_calls?.map((c) => c.name))
      const before = allIds(message)
      const firsts = before.filter((x, i) => x !== "" && before.indexOf(x) === i)
      for (const first of firsts) assert.strictEqual(ids[before.indexOf(first)], first)
      assert.strictEqual(M.uniqueToolCallIds(unique), unique)
    }
  )
})
