/**
 * Scripting the goal loop's model calls in gateway tests: telling the evaluator's request from the agent's, counting
 * the hidden continuation turns a request holds, and writing the evaluator's JSON verdict.
 */
import type { ChatRequestBody } from "../../src/layers/ScriptedChatServer.js"
import { messageText } from "./modelRequests.js"

/** How DeerFlow's evaluator prompt begins. */
export const EVALUATOR = "You are a strict completion evaluator"

/** Whether the request is the goal evaluator's. */
export const isEvaluator = (body: ChatRequestBody): boolean =>
  messageText(body.messages[0] ?? {}).startsWith(EVALUATOR)

/** How many hidden `<goal_continuation>` turns the request holds. */
export const continuations = (body: ChatRequestBody): number =>
  body.messages.filter((m) => messageText(m).startsWith("<goal_continuation>")).length

/** The evaluator's answer: met (`none`) or not met yet, unless a blocker and reason are given. */
export const verdict = (
  satisfied: boolean,
  blocker = satisfied ? "none" : "goal_not_met_yet",
  reason = satisfied ? "Done." : "Not there yet."
): string => JSON.stringify({ satisfied, blocker, reason, evidence_summary: "The assistant reported a step." })
