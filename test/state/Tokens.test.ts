import { assert, describe, it } from "@effect/vitest"
import * as Either from "effect/Either"
import * as FastCheck from "effect/FastCheck"
import { countTokens } from "gpt-tokenizer/encoding/o200k_base"
import type { Message, MessageWrite } from "../../src/state/Message.js"
import * as M from "../../src/state/Message.js"
import { addMessages } from "../../src/state/Reducers.js"
import * as Tokens from "../../src/state/Tokens.js"

/** A counter whose tokenizer calls are recorded, per text. */
const spyCounter = () => {
  const calls: Array<string> = []
  const counter = Tokens.makeCounter((text) => {
    calls.push(text)
    return Tokens.countText(text)
  })
  return { counter, calls }
}

/** The expected count of messages[from..to), recomputed from scratch with the tokenizer. */
const recount = (messages: ReadonlyArray<Message>, from = 0, to = messages.length) => {
  let n = 0
  for (let i = from; i < to; i++) {
    const message = messages[i]!
    const images = typeof message.content === "string"
      ? 0
      : message.content.filter((block) => block.type === "image_url").length
    n += Tokens.MESSAGE_OVERHEAD + Tokens.countText(Tokens.countedText(message)) + images * Tokens.IMAGE_TOKENS
  }
  return n
}

describe("Tokens", () => {
  it("counts with o200k, and treats special-token text in user content as plain text", () => {
    assert.strictEqual(Tokens.countText("hello world"), countTokens("hello world"))
    assert.strictEqual(Tokens.countText(""), 0)
    // The tokenizer throws on this by default; a user may well paste it.
    const special = "please explain <|endoftext|> and <|im_start|>"
    assert.isAbove(Tokens.countText(special), 5)
    assert.throws(() => countTokens(special))
  })

  it("counts a message's text, its tool calls and its images", () => {
    const plain = M.ai("I will read the file.")
    const withCall = M.ai("I will read the file.", {
      tool_calls: [{ id: "c1", name: "read_file", args: { path: "/mnt/user-data/workspace/report.md" } }]
    })
    assert.isAbove(Tokens.messageTokens(withCall), Tokens.messageTokens(plain) + 5)
    const image = M.human([
      { type: "text", text: "what is this?" },
      { type: "image_url", image_url: { url: "data:x" } }
    ])
    assert.strictEqual(
      Tokens.messageTokens(image),
      Tokens.MESSAGE_OVERHEAD + Tokens.countText("what is this?") + Tokens.IMAGE_TOKENS
    )
  })

  it("tokenizes each message object once, however often it is counted", () => {
    const { counter, calls } = spyCounter()
    const a = M.human("first question about the quarterly report")
    const b = M.ai("an answer that is long enough to have several tokens in it")
    for (let i = 0; i < 5; i++) {
      counter.message(a)
      counter.message(b)
    }
    assert.strictEqual(calls.length, 2)
    assert.strictEqual(counter.tokenized(), 2)
  })

  it("keeps running totals: a thread of 2,000 messages growing by 2 per step tokenizes only the new ones", () => {
    const { counter, calls } = spyCounter()
    const totals = Tokens.makeTotals(counter)
    let messages: ReadonlyArray<Message> = Array.from({ length: 2000 }, (_, i) =>
      i % 2 === 0 ? M.human(`question number ${i}`) : M.ai(`answer number ${i} with some more words`))
    const first = totals.of(messages).total
    assert.strictEqual(calls.length, 2000)
    let expected = recount(messages)
    assert.strictEqual(first, expected)
    for (let step = 0; step < 10; step++) {
      const write = [
        M.ai("", { tool_calls: [{ id: `c${step}`, name: "bash", args: { command: `ls ${step}` } }] }),
        M.tool(`file-${step}.txt`, `c${step}`)
      ]
      messages = Either.getOrThrow(addMessages(messages, write))
      const before = calls.length
      const total = totals.of(messages).total
      assert.strictEqual(calls.length - before, 2, `step ${step} tokenized only its two new messages`)
      expected += recount(write)
      assert.strictEqual(total, expected)
    }
    // Asking again for the same array costs nothing.
    const before = calls.length
    totals.of(messages)
    assert.strictEqual(calls.length, before)
  })

  it.prop(
    "running totals equal a full recount after appends, replacements, removals and rewrites",
    [
      FastCheck.array(
        FastCheck.oneof(
          FastCheck.record({ op: FastCheck.constant("append" as const), n: FastCheck.integer({ min: 1, max: 4 }) }),
          FastCheck.record({ op: FastCheck.constant("replace" as const), at: FastCheck.nat() }),
          FastCheck.record({ op: FastCheck.constant("remove" as const), at: FastCheck.nat() }),
          FastCheck.record({ op: FastCheck.constant("rewrite" as const), keep: FastCheck.nat({ max: 6 }) })
        ),
        { minLength: 1, maxLength: 40 }
      )
    ],
    ([ops]) => {
      const { counter } = spyCounter()
      const totals = Tokens.makeTotals(counter)
      let messages: ReadonlyArray<Message> = []
      const objects = new Set<Message>()
      let serial = 0
      for (const op of ops) {
        let write: Array<MessageWrite> = []
        if (op.op === "append") {
          for (let i = 0; i < op.n; i++) write.push(M.human(`message ${serial++} `.repeat(1 + (serial % 5))))
        } else if (messages.length === 0) continue
        else if (op.op === "replace") {
          const target = messages[op.at % messages.length]!
          write = [M.ai(`replacement ${serial++}`, { id: target.id })]
        } else if (op.op === "remove") write = [M.remove(messages[op.at % messages.length]!.id)]
        else write = [M.remove(M.REMOVE_ALL_MESSAGES), ...messages.slice(-op.keep)]
        messages = Either.getOrThrow(addMessages(messages, write))
        messages.forEach((m) => objects.add(m))
        const prefix = totals.of(messages)
        assert.strictEqual(prefix.length, messages.length)
        assert.strictEqual(prefix.total, recount(messages))
        const mid = messages.length >> 1
        assert.strictEqual(prefix.at(mid), recount(messages, 0, mid))
      }
      // Every message object that ever was in the thread was tokenized at most once.
      assert.isAtMost(counter.tokenized(), objects.size)
    }
  )

  // DeerFlow test_tiktoken_cache_and_count_tokens.py::TestCountTokens (the character estimate of `token_counting:
  // char`): len // 4 for English, len // 2 for CJK text, each part rounded down in mixed text
  it("estimates without a tokenizer as DeerMem does: a quarter token a character, half for CJK, rounded down", () => {
    const english = "Hello, world! This is a test."
    assert.strictEqual(Tokens.estimateText(english), Math.floor(english.length / 4))
    assert.strictEqual(Tokens.estimateText("Some text to count"), 4)
    const chinese = "\u7528\u6237\u504f\u597d\u7b80\u6d01\u7684\u4e2d\u6587\u56de\u7b54\u5e76\u5173\u6ce8\u91d1\u878d\u9886\u57df"
    assert.strictEqual(Tokens.estimateText(chinese), Math.floor(chinese.length / 2))
    const mixed = "User\u559c\u6b22Python\u548c\u6570\u636e\u5206\u6790"
    assert.strictEqual(Tokens.estimateText(mixed), Math.floor(10 / 4) + Math.floor(7 / 2))
    // kana and Hangul syllables are dense too; an emoji is one character, as Python counts
    assert.strictEqual(Tokens.estimateText("\u3053\u3093\u306b\u3061\ud55c\uad6d"), 3)
    assert.strictEqual(Tokens.estimateText("\u{1F600}abc"), 1)
    assert.strictEqual(Tokens.estimateText(""), 0)
  })
})
