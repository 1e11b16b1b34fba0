/**
 * How a subagent's run ended, told to its parent (SPEC §8.2 item 8): its status, result or error, stop reason and
 * token usage, from its run's end event and its messages. Re-exported by `Subagents`.
 */
import * as LLMErrorHandling from "../middleware/LLMErrorHandling.js"
import type { RunEndEvent } from "../services/RunEvents.js"
import type { AIMessage, Message } from "../state/Message.js"
import * as M from "../state/Message.js"
import type { Outcome, TokenUsage } from "../state/SubagentStatus.js"


/**
 * Token usage summed over AI messages, as DeerFlow's token collector counts it: a zero total is input + output,
 * and a response that spent nothing is not counted (none counted = no usage).
 */
export const usageOf = (messages: ReadonlyArray<Message>): TokenUsage | undefined => {
  let input = 0
  let output = 0
  let total = 0
  let found = false
  for (const m of messages) {
    if (m.type !== "ai" || m.usage_metadata === undefined) continue
    const u = m.usage_metadata
    const spent = M.spentTokens(u)
    if (spent <= 0) continue
    found = true
    input += u.input_tokens
    output += u.output_tokens
    total += spent
  }
  return found ? { input_tokens: input, output_tokens: output, total_tokens: total } : undefined
}

const lastAi = (messages: ReadonlyArray<Message>): AIMessage | undefined => {
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i]!
    if (m.type === "ai") return m
  }
  return undefined
}

/**
 * How a subagent's run ended, as the status contract says it (SPEC §8.2 item 8): a normal end is `completed`
 * with the last answer (a loop or token cap as its stop reason); the recursion limit is `turn_capped`,
 * `completed` with the last AI message's text if it has one, else `failed` (an earlier message's text is not
 * taken, as in DeerFlow); a model failure is `failed`, its error the text of the fallback that answered it.
 */
export const outcomeOf = (
  end: RunEndEvent,
  messages: ReadonlyArray<Message>,
  info: { readonly maxTurns: number; readonly modelName?: string | undefined }
): Outcome => {
  const usage = usageOf(messages)
  const base = { modelName: info.modelName, usage }
  const last = lastAi(messages)
  const lastText = last === undefined ? "" : M.text(last).trim()
  switch (end.status) {
    case "success": {
      const stopReason = end.stop_reason === "loop_capped" || end.stop_reason === "token_capped"
        ? end.stop_reason
        : undefined
      return { ...base, status: "completed", stopReason, result: lastText === "" ? "No response generated" : lastText }
    }
    case "error": {
      if (end.stop_reason === "recursion_limit") {
        // only the last answer counts as partial work: an earlier one ("Let me look.") is not a result
        return lastText !== ""
          ? { ...base, status: "completed", stopReason: "turn_capped", result: lastText }
          : { ...base, status: "failed", stopReason: "turn_capped", error: `Reached max_turns=${info.maxTurns}` }
      }
      // a failure LLMErrorHandling answered with its marked message: that text is the error, as DeerFlow takes it
      const fallback = last?.additional_kwargs?.[LLMErrorHandling.FALLBACK_MARKER] === true && lastText !== ""
      return { ...base, status: "failed", error: fallback ? lastText : end.error?.message ?? "The subagent failed" }
    }
    case "cancelled":
      return { ...base, status: "cancelled", error: "Task cancelled by user." }
    case "interrupted":
      return {
        ...base,
        status: "failed",
        error: "The subagent stopped to wait for an answer, which subagents cannot get."
      }
  }
}
