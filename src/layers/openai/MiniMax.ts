/**
 * MiniMax's whole (non-streamed) answers, pure (DeerFlow's `PatchedChatMiniMax`): the `<think>…</think>` blocks its
 * models write into the text are taken out of it and kept as the answer's reasoning, after any it gave apart
 * (`reasoning_details`, asked for with `reasoning_split`). A streamed answer is read as any other.
 */
import * as LlmText from "../../state/LlmText.js"
import { reasoningDetailsText, reasoningText } from "./ChunkAccumulator.js"

const isRecord = (u: unknown): u is Record<string, unknown> =>
  typeof u === "object" && u !== null && !Array.isArray(u)

/**
 * The messages of a request to MiniMax without user messages' names (DeerFlow's `_strip_user_message_names`):
 * MiniMax refuses a request whose user messages are named differently (`user name must be consistent (2013)`),
 * and Antler names some (`summary`, `loop_warning`, ...), as LangChain's client sends them.
 */
export const messages = <A extends { readonly role: string }>(list: ReadonlyArray<A>): Array<A> =>
  list.map((message) => {
    if (message.role !== "user" || !("name" in message)) return message
    const { name: _name, ...rest } = message as A & { readonly name?: unknown }
    return rest as unknown as A
  })

/** The text without its `<think>` blocks (trimmed), and what they held (trimmed, blank ones left out). */
export const splitThinkBlocks = (text: string): { readonly text: string; readonly thoughts: Array<string> } => {
  // (in linear time: a hostile answer of unclosed tags is read at once)
  const { blocks, text: rest } = LlmText.splitBlocks(text, "<think>", "<\\/think>")
  return { text: rest.trim(), thoughts: blocks.map((inner) => inner.trim()).filter((inner) => inner !== "") }
}

/** A whole answer's chunk with its text's `<think>` blocks moved to `reasoning_content` (see the module). */
export const readWholeChunk = (chunk: unknown): unknown => {
  if (!isRecord(chunk) || !Array.isArray(chunk.choices)) return chunk
  return {
    ...chunk,
    choices: chunk.choices.map((choice: unknown) => {
      if (!isRecord(choice) || !isRecord(choice.delta) || typeof choice.delta.content !== "string") return choice
      const delta = choice.delta
      const { text, thoughts } = splitThinkBlocks(delta.content as string)
      if (thoughts.length === 0) return choice
      const given = typeof delta.reasoning_content === "string"
        ? delta.reasoning_content
        : reasoningText(delta.reasoning) ?? reasoningDetailsText(delta.reasoning_details)
      const parts: Array<string> = []
      for (const part of [given?.trim(), ...thoughts]) if (part && !parts.includes(part)) parts.push(part)
      return { ...choice, delta: { ...delta, content: text, reasoning_content: parts.join("\n\n") } }
    })
  }
}
