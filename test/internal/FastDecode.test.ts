import { assert, describe, expect, it } from "@effect/vitest"
import * as Arbitrary from "effect/Arbitrary"
import * as Either from "effect/Either"
import * as FC from "effect/FastCheck"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import { isDeepStrictEqual } from "node:util"
import * as FastDecode from "../../src/internal/FastDecode.js"
import * as M from "../../src/state/Message.js"
import * as TS from "../../src/state/ThreadState.js"

// What the stores decoded with before FastDecode, and what it must agree with.
const options = { onExcessProperty: "preserve" } as const
const schemaUpdates = Schema.decodeUnknownEither(Schema.Array(TS.StateUpdate), options)
const schemaState = Schema.decodeUnknownEither(TS.ThreadState, options)

const json = (value: unknown): unknown => JSON.parse(JSON.stringify(value))
const problems = (error: ParseResult.ParseError) => ParseResult.ArrayFormatter.formatErrorSync(error)

/**
 * Both decoders give equal values, or both fail with the same issues at the same paths. Give both the same input:
 * Schema turns a `__proto__` key into the prototype of the object it builds, which is compared by identity.
 */
const agree = <A>(
  fast: Either.Either<A, ParseResult.ParseError>,
  slow: Either.Either<A, ParseResult.ParseError>
) => {
  // (isDeepStrictEqual rather than expect's diff, which takes minutes on values this size when shrinking)
  if (Either.isRight(slow)) {
    assert.isTrue(Either.isRight(fast), Either.isLeft(fast) ? JSON.stringify(problems(fast.left)) : "")
    assert.isTrue(isDeepStrictEqual(Either.getOrThrow(fast), slow.right), "a different value than Schema's")
  } else {
    assert.isTrue(Either.isLeft(fast), "decoded what Schema refuses")
    const [got, want] = [problems(Either.flip(fast).pipe(Either.getOrThrow)), problems(slow.left)]
    assert.isTrue(isDeepStrictEqual(got, want), `${JSON.stringify(got)} instead of ${JSON.stringify(want)}`)
  }
}

// ---------------------------------------------------------------------------------------------------------
// Mutations: a value, then a few slots in it replaced, removed, or given a `__proto__` key

type Mutation = readonly [slot: number, kind: "replace" | "delete" | "proto", value: unknown]

const slots = (root: unknown): Array<[Record<string, unknown> | Array<unknown>, string | number]> => {
  const out: Array<[Record<string, unknown> | Array<unknown>, string | number]> = []
  const walk = (node: unknown) => {
    if (Array.isArray(node)) {
      node.forEach((item, i) => {
        out.push([node, i])
        walk(item)
      })
    } else if (typeof node === "object" && node !== null) {
      for (const key of Object.keys(node)) {
        out.push([node as Record<string, unknown>, key])
        walk((node as Record<string, unknown>)[key])
      }
    }
  }
  walk(root)
  return out
}

const mutate = (value: unknown, mutations: ReadonlyArray<Mutation>): unknown => {
  const root = json(value)
  for (const [slot, kind, generated] of mutations) {
    // a copy each time: the same value inserted twice, or into itself, would make a cycle
    const replacement = json(generated)
    const all = slots(root)
    if (all.length === 0) break
    const [parent, key] = all[slot % all.length]!
    if (kind === "replace") (parent as Record<string | number, unknown>)[key] = replacement
    else if (kind === "delete" && !Array.isArray(parent)) delete parent[key as string]
    else if (kind === "proto") {
      const target = (parent as Record<string | number, unknown>)[key]
      if (typeof target === "object" && target !== null && !Array.isArray(target)) {
        Object.defineProperty(target, "__proto__", { value: replacement, enumerable: true, writable: true, configurable: true })
      }
    }
  }
  // as it would be read back: JSON.parse makes `__proto__` an own key
  return json(root)
}

const mutationsArb: FC.Arbitrary<ReadonlyArray<Mutation>> = FC.array(
  FC.tuple(
    FC.nat(),
    FC.constantFrom("replace" as const, "delete" as const, "proto" as const),
    FC.oneof(FC.jsonValue({ maxDepth: 2 }), FC.constant({ tool_calls: [{ id: "x", name: "y" }] }))
  ),
  { maxLength: 3 }
)

const messageArb = Arbitrary.make(M.Message)
const writeArb = FC.oneof(messageArb, FC.string().map(M.remove))
const updateArb = FC.oneof(
  { weight: 4, arbitrary: FC.array(writeArb, { maxLength: 4 }).map((messages) => ({ messages })) },
  { weight: 2, arbitrary: Arbitrary.make(TS.StateUpdate) }
)
const updatesArb = FC.array(updateArb, { maxLength: 3 }).map((updates) => Schema.encodeSync(Schema.Array(TS.StateUpdate))(updates))
const stateArb = Arbitrary.make(TS.ThreadState).map((state) => Schema.encodeSync(TS.ThreadState)(state))

describe("FastDecode.decodeStateUpdates", () => {
  it.prop("agrees with Schema on stored updates", [updatesArb], ([updates]) => {
    const parsed = json(updates)
    agree(FastDecode.decodeStateUpdates(parsed), schemaUpdates(json(updates)))
  })

  it.prop("agrees with Schema on damaged updates (wrong types, missing keys, __proto__ keys)", [
    updatesArb,
    mutationsArb
  ], ([updates, mutations]) => {
    const damaged = mutate(updates, mutations)
    agree(FastDecode.decodeStateUpdates(damaged), schemaUpdates(damaged))
  }, { fastCheck: { numRuns: 400 } })

  it("keeps plain parsed messages as they are, and decodes what needs it as Schema does", () => {
    const call = { id: "call_1", name: "read_file", args: { path: "/a" }, type: "tool_call" as const }
    const updates = json([{
      messages: [
        M.human([{ type: "text", text: "hi", citations: [1] }], { id: "h" }),
        M.ai("", { id: "a", tool_calls: [call], usage_metadata: { input_tokens: 1, output_tokens: 2, total_tokens: 3 } }),
        M.tool("content", "call_1", { id: "t", name: "read_file", status: "success" }),
        M.remove("gone")
      ],
      title: "A title",
      extra_field: 1
    }]) as Array<{ messages: Array<unknown> }>
    const decoded = Either.getOrThrow(FastDecode.decodeStateUpdates(updates))
    updates[0]!.messages.forEach((message, i) => assert.strictEqual(decoded[0]!.messages![i], message))
    expect(decoded).toStrictEqual(Either.getOrThrow(schemaUpdates(json(updates))))

    // raw provider calls are parsed by the schema's transform
    const raw = json([{
      messages: [M.ai("", {
        id: "r",
        additional_kwargs: { tool_calls: [{ id: "c", type: "function", function: { name: "ls", arguments: "{}" } }] }
      })]
    }])
    const parsedCalls = Either.getOrThrow(FastDecode.decodeStateUpdates(raw))[0]!.messages![0]!
    expect(M.toolCalls(parsedCalls as M.Message)).toStrictEqual([{ id: "c", name: "ls", args: {}, type: "tool_call" }])
  })

  it("decodes these edge cases exactly as Schema does", () => {
    const ai = (fields: Record<string, unknown>) => json([{ messages: [{ type: "ai", id: "a", content: "", ...fields }] }])
    const withProto = (target: Record<string, unknown>) => {
      Object.defineProperty(target, "__proto__", { value: { polluted: true }, enumerable: true, writable: true, configurable: true })
      return target
    }
    const cases: Array<unknown> = [
      ai({ usage_metadata: { input_tokens: -1, output_tokens: 0, total_tokens: 0 } }),
      ai({ usage_metadata: { input_tokens: 1.5, output_tokens: 0, total_tokens: 0 } }),
      ai({ usage_metadata: { input_tokens: 0, output_tokens: "1", total_tokens: 0 } }),
      ai({ usage_metadata: { input_tokens: 0, output_tokens: 0, total_tokens: -2 } }),
      ai({ usage_metadata: { input_tokens: 0, output_tokens: 0, total_tokens: 0, output_token_details: 1 } }),
      ai({ usage_metadata: [] }),
      ai({ response_metadata: "x" }),
      ai({ name: 3 }),
      ai({ tool_calls: {} }),
      ai({ invalid_tool_calls: [{ id: 1, name: null, args: null, error: null }] }),
      ai({ invalid_tool_calls: [{ id: null, name: null, args: null, error: 3 }] }),
      ai({ tool_calls: [{ id: "c", name: "n", args: [] }] }),
      ai({ tool_calls: [{ id: "c", name: "n", args: {}, type: "other" }] }),
      ai({ content: [{ type: "image_url", image_url: withProto({ url: "u" }) }] }),
      ai({ content: [{ type: "image_url", image_url: { url: 1 } }] }),
      ai({ content: [{ type: 1, text: "x" }] }),
      ai({ additional_kwargs: withProto({}) }),
      json([{ messages: [withProto({ type: "human", id: "h", content: "x" })] }]),
      json([{ messages: [{ type: "tool", id: "t", content: "x", tool_call_id: "c", status: "failed" }] }]),
      json([{ messages: [{ type: "remove" }] }]),
      json([{ messages: [{ type: "user", id: "u", content: "x" }] }]),
      json([{ messages: [M.human("x", { id: "h" })], todos: [{ content: "c", status: "done" }] }]),
      json([{ messages: {} }]),
      json({ messages: [] })
    ]
    for (const value of cases) agree(FastDecode.decodeStateUpdates(value), schemaUpdates(value))
  })

  it("fails as Schema does, with the path of what is wrong", () => {
    const bad = json([{ messages: [M.human("ok", { id: "h" }), { type: "ai", id: 7, content: "" }] }])
    const decoded = FastDecode.decodeStateUpdates(bad)
    assert.isTrue(Either.isLeft(decoded))
    const [issue] = problems(Either.flip(decoded).pipe(Either.getOrThrow))
    expect(issue!.path).toStrictEqual([0, "messages", 1, "id"])
  })
})

describe("FastDecode.decodeThreadState", () => {
  it.prop("agrees with Schema on stored snapshots", [stateArb], ([state]) => {
    agree(FastDecode.decodeThreadState(json(state)), schemaState(json(state)))
  })

  it.prop("agrees with Schema on damaged snapshots", [stateArb, mutationsArb], ([state, mutations]) => {
    const damaged = mutate(state, mutations)
    agree(FastDecode.decodeThreadState(damaged), schemaState(damaged))
  })

  it("fills in the fields a snapshot written before them lacks, as Schema does", () => {
    const { delegations: _d, goal: _g, ...old } = { ...TS.empty, messages: [M.human("hi", { id: "h" })] }
    const decoded = Either.getOrThrow(FastDecode.decodeThreadState(json(old)))
    expect(decoded.delegations).toStrictEqual([])
    expect(decoded.goal).toBeNull()
    expect(decoded).toStrictEqual(Either.getOrThrow(schemaState(json(old))))
  })
})
