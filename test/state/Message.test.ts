import { assert, describe, it } from "@effect/vitest"
import * as Arbitrary from "effect/Arbitrary"
import * as FC from "effect/FastCheck"
import * as FastCheck from "effect/FastCheck"
import * as Schema from "effect/Schema"
import type { AIMessage } from "../../src/state/Message.js"
import * as M from "../../src/state/Message.js"
import * as TS from "../../src/state/ThreadState.js"

// An AI message as LangChain serialises one from an older tool-calling integration: calls only in the raw payload.
const imported = {
  type: "ai",
  id: "a1",
  content: "",
  additional_kwargs: {
    refusal: null,
    tool_calls: [
      { id: "call_1", type: "function", index: 0, function: { name: "read_file", arguments: "{\"path\":\"a.md\"}" } },
      { id: "call_2", type: "function", function: { name: "write_file", arguments: "{\"path\": " } },
      { id: "call_3", name: "ls", args: { path: "/" } },
      42
    ]
  }
}

describe("raw provider tool calls", () => {
  it("decoding a message (a stored or imported thread) parses raw calls into calls, as LangChain does", () => {
    const message = Schema.decodeUnknownSync(M.Message)(imported) as AIMessage
    assert.deepStrictEqual(message.tool_calls, [
      { id: "call_1", name: "read_file", args: { path: "a.md" }, type: "tool_call" },
      { id: "call_3", name: "ls", args: { path: "/" }, type: "tool_call" }
    ])
    assert.strictEqual(message.invalid_tool_calls!.length, 1)
    assert.deepInclude(message.invalid_tool_calls![0]!, { id: "call_2", name: "write_file", args: "{\"path\": " })
    assert.deepStrictEqual(message.additional_kwargs, { refusal: null }, "the raw copy is dropped, the rest kept")
    const state = Schema.decodeUnknownSync(TS.ThreadState)({ ...TS.empty, messages: [imported] })
    assert.deepStrictEqual(M.toolCalls(state.messages[0]!).map((c) => c.id), ["call_1", "call_3"])
  })

  it("raw calls are ignored when the message has calls of its own", () => {
    const both = M.ai("", {
      tool_calls: [{ id: "c", name: "ls", args: {} }],
      additional_kwargs: { tool_calls: [{ id: "c", type: "function", function: { name: "ls", arguments: "{}" } }] }
    })
    assert.strictEqual(M.parseRawToolCalls(both), both)
    const plain = M.ai("text", { additional_kwargs: { tool_calls: [] } })
    assert.strictEqual(M.parseRawToolCalls(plain), plain)
  })

  it.prop("parsing is idempotent and leaves no raw-only calls", [Arbitrary.make(M.Message)], ([message]) => {
    if (message.type !== "ai") return
    const once = M.parseRawToolCalls(message)
    assert.isUndefined(M.rawToolCalls(once))
    assert.strictEqual(M.parseRawToolCalls(once), once)
  })

  it.prop(
    "every object entry of a raw payload becomes exactly one call",
    [FC.array(FC.oneof(
      FC.record({ id: FC.string(), type: FC.constant("function"), function: FC.record({ name: FC.string(), arguments: FC.string() }) }),
      FC.record({ id: FC.string(), name: FC.string(), args: FC.dictionary(FC.string(), FC.jsonValue()) }),
      FC.jsonValue()
    ), { minLength: 1, maxLength: 5 })],
    ([raw]) => {
      const parsed = M.parseRawToolCalls(M.ai("", { additional_kwargs: { tool_calls: raw } }))
      const objects = raw.filter((e) => typeof e === "object" && e !== null && !Array.isArray(e)).length
      assert.strictEqual((parsed.tool_calls?.length ?? 0) + (parsed.invalid_tool_calls?.length ?? 0), objects)
    }
  )
})


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
