/**
 * ToolResultSanitization (SPEC §5.3, lead chain slot 3): results of the web tools (`web_fetch`, `web_search`,
 * `image_search`, `web_capture`) carry text written by whoever owns the page. Before the model reads them,
 * framework and injection tags in that text are HTML-escaped and user-input boundary markers neutralised
 * (`InputSanitization.neutralizeUntrustedTags`), so a page cannot pose as a `<system_reminder>` or close a
 * frame. Results of every other tool (bash, read_file, MCP tools under other names) are left as they are.
 */
import * as Effect from "effect/Effect"
import type { ToolResult } from "../services/ToolService.js"
import type { ContentBlock, Content, Message, ToolMessage } from "../state/Message.js"
import { neutralizeUntrustedTags } from "./InputSanitization.js"
import * as Middleware from "./Middleware.js"
import * as Chain from "./Chain.js"

/** The tools whose results are sanitised. */
export const SANITIZED_TOOLS: ReadonlySet<string> = new Set(["web_fetch", "web_search", "image_search", "web_capture"])

/** The content with its text (a string, or each text block) neutralised; the same value when nothing changes. */
export const sanitizeContent = (content: Content): Content => {
  if (typeof content === "string") return neutralizeUntrustedTags(content)
  let out: Array<ContentBlock> | undefined
  for (let i = 0; i < content.length; i++) {
    const block = content[i]!
    if (block.type !== "text" || typeof block.text !== "string") continue
    const text = neutralizeUntrustedTags(block.text)
    if (text === block.text) continue
    ;(out ??= content.slice())[i] = { ...block, text } as ContentBlock
  }
  return out ?? content
}

const sanitizeMessage = <A extends Message>(message: A): A => {
  if (message.type !== "tool") return message
  const content = sanitizeContent(message.content)
  return content === message.content ? message : { ...message, content }
}

/**
 * The result with its ToolMessage (and any ToolMessage its state update writes) sanitised; the same object when
 * nothing changes.
 */
export const sanitizeResult = (result: ToolResult): ToolResult => {
  const message: ToolMessage = sanitizeMessage(result.message)
  const written = result.update?.messages
  const messages = written?.map((m) => (m.type === "tool" ? sanitizeMessage(m) : m))
  const changedWrites = written !== undefined && messages!.some((m, i) => m !== written[i])
  if (message === result.message && !changedWrites) return result
  return {
    ...result,
    message,
    ...(changedWrites ? { update: { ...result.update, messages: messages! } } : {})
  }
}

/** ToolResultSanitization. Needs nothing from the run. */
export const layer = (): Middleware.Middleware =>
  Middleware.make({
    tool: (call, next) => (SANITIZED_TOOLS.has(call.name) ? Effect.map(next(call), sanitizeResult) : next(call))
  })

/** Its chain entry: web tool results are neutralised (framework tags escaped) before the budget previews them. */
export const entry = () =>
  Chain.entry("ToolResultSanitization", () => layer(), [
    { inside: "ToolOutputBudget", reason: "the budget previews and saves the neutralised text, as its last step" },
    { outside: "ToolErrorHandling", reason: "a web tool's failure, made a result there, carries page text too" }
  ])
