/**
 * DeerFlow's test_utils_llm_text: a one-shot answer made ready to be read as data (reasoning blocks removed, a
 * thought cut off dropped, one wrapping code fence unwrapped).
 */
import { assert, describe, it } from "@effect/vitest"
import * as LlmText from "../../src/state/LlmText.js"

describe("LlmText", () => {
  it("removes <think> blocks: multiline, any case, with attributes, each on its own", () => {
    assert.strictEqual(LlmText.withoutThinkBlocks("before<think>reasoning</think>after"), "beforeafter")
    assert.strictEqual(LlmText.withoutThinkBlocks("answer\n<think>\nmulti\nline\n</think>\n"), "answer")
    assert.strictEqual(LlmText.withoutThinkBlocks("<THINK>x</THINK >done"), "done")
    assert.strictEqual(LlmText.withoutThinkBlocks('<think class="a">secret</think>visible'), "visible")
    assert.strictEqual(LlmText.withoutThinkBlocks("a<think>1</think>b<think>2</think>c"), "abc")
    assert.strictEqual(LlmText.withoutThinkBlocks("<think>only</think>"), "")
    assert.strictEqual(LlmText.withoutThinkBlocks("just text"), "just text")
    assert.strictEqual(LlmText.withoutThinkBlocks("<thinking>kept</thinking>"), "<thinking>kept</thinking>")
  })

  it("ends the text at a <think> left open, unless told to keep it", () => {
    assert.strictEqual(LlmText.withoutThinkBlocks("visible answer <think>partial reasoning"), "visible answer")
    const text = "visible answer <think>partial reasoning"
    assert.strictEqual(LlmText.withoutThinkBlocks(text, false), text)
    assert.strictEqual(LlmText.withoutThinkBlocks("<think>done</think>keep<think>trunc"), "keep")
    assert.strictEqual(LlmText.withoutThinkBlocks("<think>done</think>keep<think>trunc", false), "keep<think>trunc")
  })

  it("unwraps one code fence around the whole text, and nothing else", () => {
    assert.strictEqual(LlmText.withoutCodeFence('```json\n{"a": 1}\n```'), '{"a": 1}')
    assert.strictEqual(LlmText.withoutCodeFence("```\nhello\n```"), "hello")
    assert.strictEqual(LlmText.withoutCodeFence("  ```json\n{}\n```  "), "{}")
    assert.strictEqual(LlmText.withoutCodeFence("```python\ndef f():\n    return 1\n```"), "def f():\n    return 1")
    assert.strictEqual(LlmText.withoutCodeFence("plain text"), "plain text")
    assert.strictEqual(LlmText.withoutCodeFence("see `code` here"), "see `code` here")
    assert.strictEqual(LlmText.withoutCodeFence("```json"), "```json")
    assert.strictEqual(LlmText.withoutCodeFence("```\ncontent"), "```\ncontent")
  })
})
