/**
 * A hostile answer of unclosed `<think>` tags, found to hold the event loop: a lazy `<think>[\s\S]*?</think>`
 * expression looks for a close after every opening, so 50,000 of them (350 KB) took ten seconds, and the 570,000 a
 * whole answer's 4 MB holds over twenty minutes, every user of the process waiting. A MiniMax model's whole answer
 * (its think blocks moved to its reasoning), a thread's first answer (its title) and a one-shot answer (follow-up
 * questions, a polished draft, the goal evaluator's verdict) were read so. The MiniMax case goes through the real
 * `openai` client against a loopback server.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as OpenAiModel from "../../src/layers/OpenAiModel.js"
import * as ScriptedChatServer from "../../src/layers/ScriptedChatServer.js"
import * as Title from "../../src/middleware/Title.js"
import { ModelConfig } from "../../src/services/AppConfig.js"
import { RunEvents } from "../../src/services/RunEvents.js"
import * as LlmText from "../../src/state/LlmText.js"
import type { AIMessage } from "../../src/state/Message.js"
import * as M from "../../src/state/Message.js"
import { inRun } from "../support/fixtures.js"

const OPEN_TAGS = "<think>".repeat(50_000)
const MINIMAX = "deerflow.models.patched_minimax:PatchedChatMiniMax"

/** `f()`'s result and how long it took, in milliseconds. */
const timed = <A>(f: () => A): { readonly result: A; readonly ms: number } => {
  const start = performance.now()
  const result = f()
  return { result, ms: performance.now() - start }
}

describe("an answer of unclosed <think> tags", () => {
  it.scopedLive("a MiniMax model's whole answer is read at once, the tags left in its text", () =>
    Effect.gen(function*() {
      const content = `<think>plan</think>${OPEN_TAGS}Answer.`
      const server = yield* ScriptedChatServer.start([{
        raw: JSON.stringify({
          id: "c",
          object: "chat.completion",
          model: "m",
          choices: [{ index: 0, message: { role: "assistant", content }, finish_reason: "stop" }]
        }),
        contentType: "application/json"
      }])
      const model = yield* OpenAiModel.fromConfig(Schema.decodeUnknownSync(Schema.Array(ModelConfig))([
        { name: "mm", use: MINIMAX, model: "MiniMax-M3", base_url: server.url }
      ]))
      const sink = { emit: () => Effect.void }
      const start = performance.now()
      const asked = { systemPrompt: "s", messages: [M.human("q")], tools: [], settings: {} }
      const response = yield* model.generate(asked).pipe(
        Effect.provide(Context.add(inRun().context, RunEvents, sink))
      )
      assert.isBelow(performance.now() - start, 5000)
      const message = response.message as AIMessage
      assert.strictEqual(message.additional_kwargs?.reasoning_content, "plan")
      assert.isTrue(M.text(message).endsWith("Answer."))
      assert.strictEqual(M.text(message).length, OPEN_TAGS.length + "Answer.".length)
    }))

  it("a title's and a one-shot answer's think blocks are taken out at once, as before for closed ones", () => {
    const title = timed(() => Title.withoutThinking(`<THINK>x</think>${OPEN_TAGS}Title`))
    assert.isBelow(title.ms, 2000)
    assert.isTrue(title.result.endsWith("Title") && !title.result.includes("x"))
    // (an unclosed tag ends a one-shot answer: a model cut off mid-thought)
    const oneShot = timed(() => LlmText.withoutThinkBlocks(`["q"]<think a="1">x</think >${OPEN_TAGS}`))
    assert.isBelow(oneShot.ms, 2000)
    assert.strictEqual(oneShot.result, "[\"q\"]")
    // tags without their `>` (none is a tag): each attempt stops at the next one
    const unended = `kept${"<think ".repeat(50_000)}`
    const read = timed(() => LlmText.withoutThinkBlocks(unended))
    assert.isBelow(read.ms, 2000)
    assert.strictEqual(read.result, unended.trim())
    const drafted = timed(() => LlmText.withoutThinkBlocks(`draft ${OPEN_TAGS}`, false))
    assert.isBelow(drafted.ms, 2000)
    assert.strictEqual(drafted.result.length, `draft ${OPEN_TAGS}`.length)
  })
})
