/**
 * The goal loop's judgement, as DeerFlow's `runtime/goal.py` makes it (pure): what the evaluator model is asked
 * (the visible conversation against the goal's objective), how its answer is read (one JSON object, decoded with
 * Schema, its text bounded; an answer that is not such an object is refused, as DeerFlow refuses it), whether a
 * hidden continuation turn follows (the goal not met yet, within `max_continuations` and the no-progress count) or
 * why the loop stands down, the goal as it records the evaluation, and the hidden `<goal_continuation>` message.
 */
import * as Data from "effect/Data"
import * as Either from "effect/Either"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import { createHash } from "node:crypto"
import { charsOf, headChars, joinChars } from "./Chars.js"
import * as LlmText from "./LlmText.js"
import * as Markup from "./Markup.js"
import type { HumanMessage, Message } from "./Message.js"
import * as M from "./Message.js"
import type { GoalEvaluation, GoalState } from "./ThreadState.js"
import { GoalBlocker } from "./ThreadState.js"

/** DeerFlow's `MAX_GOAL_REASON_CHARS` and `MAX_GOAL_EVIDENCE_CHARS`: what is kept of the verdict's texts. */
export const MAX_REASON_CHARS = 1000
export const MAX_EVIDENCE_CHARS = 1000

/** DeerFlow's bounds on the conversation the evaluator reads: its last 30 visible messages, last 12,000 chars. */
export const MAX_CONVERSATION_MESSAGES = 30
export const MAX_CONVERSATION_CHARS = 12_000

/** The longest evaluator answer read (a longer one is refused unread). */
export const MAX_ANSWER_CHARS = 64_000

/** The `additional_kwargs` key marking a hidden continuation message (DeerFlow's). */
export const CONTINUATION_KWARG = "deerflow_goal_continuation"

/** Why the loop stopped at a goal (DeerFlow's blocker). */
export type Blocker = GoalEvaluation["blocker"]

const BLOCKERS: ReadonlySet<string> = new Set<Blocker>(GoalBlocker.literals)

/** The evaluator's verdict, read and bounded. */
export interface Verdict {
  readonly satisfied: boolean
  readonly blocker: Blocker
  readonly reason: string
  readonly evidence_summary: string
}

/** An evaluator answer that is not a verdict (DeerFlow's `ValueError`): the loop stands down, the run is kept. */
export class VerdictError extends Data.TaggedError("GoalVerdictError")<{ readonly message: string }> {}

/** The evaluator's instruction (DeerFlow's, word for word). */
export const SYSTEM_PROMPT = "You are a strict completion evaluator for an AI coding assistant.\n" +
  "Decide whether the active goal is fully satisfied using ONLY the visible conversation evidence.\n" +
  "Do not assume files, commands, tests, or external state changed unless the conversation explicitly shows it.\n" +
  "If the visible evidence is too weak to prove progress, fail closed with blocker missing_evidence.\n" +
  "Use blocker needs_user_input when the assistant is waiting on the user, run_failed when the turn failed, " +
  "external_wait when work is waiting on an outside system, goal_not_met_yet when useful autonomous work can " +
  "continue, and none only when satisfied is true.\n" +
  "Output exactly one JSON object: " +
  "{\"satisfied\": boolean, \"blocker\": string, \"reason\": string, \"evidence_summary\": string}."

/**
 * The most characters of an objective a prompt carries (the goal endpoint's bound): one written some other way (a
 * client's state update) is cut there, in the evaluator's question and in each continuation.
 */
export const MAX_OBJECTIVE_CHARS = 4000

const objectiveOf = (goal: GoalState): string => goal.objective.slice(0, MAX_OBJECTIVE_CHARS)

/** The evaluator's question: the goal and the visible conversation. */
export const userPrompt = (goal: GoalState, conversation: string): string =>
  `Active goal:\n${objectiveOf(goal)}\n\nVisible conversation evidence:\n${conversation}\n\n` +
  "Is the active goal fully satisfied?"

const kwargs = (message: Message) => message.additional_kwargs as Record<string, unknown> | undefined

/** Whether the user sees a message (a human or AI message not hidden), as DeerFlow's `_is_visible_message`. */
export const visible = (message: Message): boolean =>
  kwargs(message)?.hide_from_ui !== true && (message.type === "human" || message.type === "ai")

const textOf = (message: Message) => M.text(message).trim()

/** Whether a continuation message is one (its marker). */
export const isContinuation = (message: Message): boolean => kwargs(message)?.[CONTINUATION_KWARG] === true

/** The visible conversation the evaluator reads ("User: ..." / "Assistant: ..."), bounded as DeerFlow bounds it. */
export const conversation = (messages: ReadonlyArray<Message>): string => {
  const lines: Array<string> = []
  for (const message of messages.filter(visible).slice(-MAX_CONVERSATION_MESSAGES)) {
    const text = textOf(message)
    if (text !== "") lines.push(`${message.type === "human" ? "User" : "Assistant"}: ${text}`)
  }
  const all = lines.join("\n\n")
  if (all.length <= MAX_CONVERSATION_CHARS) return all
  const chars = charsOf(all)
  return chars.length <= MAX_CONVERSATION_CHARS ? all : joinChars(chars, chars.length - MAX_CONVERSATION_CHARS)
}

/**
 * DeerFlow's durable end-of-turn receipt: the last visible message with text is the assistant's (a turn that
 * ended on anything else gave the evaluator nothing to judge).
 */
export const endsWithAnswer = (messages: ReadonlyArray<Message>): boolean =>
  messages.findLast((message) => visible(message) && textOf(message) !== "")?.type === "ai"

/** sha256 of the latest visible answer's text ("" when none): what the no-progress breaker compares. */
export const evidenceSignature = (messages: ReadonlyArray<Message>): string => {
  const last = messages.findLast((message) => visible(message) && message.type === "ai" && textOf(message) !== "")
  return last === undefined ? "" : createHash("sha256").update(textOf(last), "utf8").digest("hex")
}

/** DeerFlow's progress key (its `json.dumps(..., sort_keys=True)`, byte for byte): blocker and evidence. */
export const progressKey = (verdict: Verdict, signature: string): string =>
  `{"blocker": ${JSON.stringify(verdict.blocker)}, "evidence_signature": ${JSON.stringify(signature)}, ` +
  `"satisfied": ${verdict.satisfied}}`

/** The no-progress count after `verdict`: one more when neither the blocker nor the evidence moved, else 0. */
export const noProgressCount = (goal: GoalState, verdict: Verdict, signature: string): number =>
  !verdict.satisfied && goal.last_evaluation?.progress_key === progressKey(verdict, signature)
    ? goal.no_progress_count + 1
    : 0

/**
 * The most hidden continuations one goal gets (DeerFlow's `DEFAULT_MAX_GOAL_CONTINUATIONS`, the goal endpoint's
 * bound): a goal written some other way (a client's state update) with a larger `max_continuations` gets no more,
 * so one request never buys an unbounded number of model calls.
 */
export const MAX_CONTINUATIONS = 8

/**
 * Why the loop stops at a goal not met (DeerFlow's stand-down reasons): blocked by something other than work left
 * (`blocked:<blocker>`), out of continuations (at most `MAX_CONTINUATIONS`), or twice without progress; none when it
 * goes on (or it is met).
 */
export const standDownReason = (goal: GoalState, verdict: Verdict, noProgress: number): string | undefined => {
  if (verdict.satisfied) return undefined
  if (verdict.blocker !== "goal_not_met_yet") return `blocked:${verdict.blocker}`
  if (goal.continuation_count >= Math.min(goal.max_continuations, MAX_CONTINUATIONS)) {
    return "max_continuations_reached"
  }
  if (noProgress >= goal.max_no_progress_continuations) return "no_progress_detected"
  return undefined
}

/** The verdict given without asking the model: no visible answer to judge yet (DeerFlow's). */
export const noEvidence: Verdict = {
  satisfied: false,
  blocker: "missing_evidence",
  reason: "No visible assistant evidence is available yet.",
  evidence_summary: ""
}

/** The verdict of a turn that did not end on a visible answer (DeerFlow's missing receipt). */
export const noReceipt: Verdict = {
  satisfied: false,
  blocker: "run_failed",
  reason: "No durable assistant end-of-turn receipt was available.",
  evidence_summary: ""
}

// the answer's object: `satisfied` a boolean; the other fields whatever they are (read leniently below)
const Answer = Schema.Struct({
  satisfied: Schema.Boolean,
  blocker: Schema.optional(Schema.Unknown),
  reason: Schema.optional(Schema.Unknown),
  evidence_summary: Schema.optional(Schema.Unknown)
})
const decodeAnswer = Schema.decodeUnknownEither(Answer)

// one line of words, at most `max` characters (anything but a string: none)
const line = (value: unknown, max: number): string =>
  typeof value === "string" ? headChars(value.trim().split(/\s+/).join(" "), max) : ""

/**
 * The verdict of the evaluator's answer, as DeerFlow's `parse_goal_evaluation_response`: `<think>` blocks and a
 * code fence removed, the text from its first `{` to its last `}` read as JSON, an object with a boolean
 * `satisfied`; its texts one line each, bounded; an unknown blocker `missing_evidence` (`none` when satisfied).
 */
export const parseVerdict = (answer: string): Either.Either<Verdict, VerdictError> => {
  if (answer.length > MAX_ANSWER_CHARS) {
    return Either.left(new VerdictError({ message: `Goal evaluator response is over ${MAX_ANSWER_CHARS} chars.` }))
  }
  const text = LlmText.withoutCodeFence(LlmText.withoutThinkBlocks(answer))
  const start = text.indexOf("{")
  const end = text.lastIndexOf("}")
  if (start < 0 || end <= start) {
    return Either.left(new VerdictError({ message: "Goal evaluator response did not contain a JSON object." }))
  }
  let payload: unknown
  try {
    payload = JSON.parse(text.slice(start, end + 1))
  } catch {
    return Either.left(new VerdictError({ message: "Goal evaluator response was not valid JSON." }))
  }
  if (typeof payload !== "object" || payload === null || Array.isArray(payload)) {
    return Either.left(new VerdictError({ message: "Goal evaluator JSON must be an object." }))
  }
  return Either.match(decodeAnswer(payload), {
    onLeft: (error) =>
      Either.left(
        new VerdictError({
          message: "Goal evaluator JSON must include boolean 'satisfied': " +
            ParseResult.TreeFormatter.formatErrorSync(error)
        })
      ),
    onRight: (read) => {
      const blocker = read.satisfied
        ? "none"
        : typeof read.blocker === "string" && read.blocker !== "none" && BLOCKERS.has(read.blocker)
        ? read.blocker as Blocker
        : "missing_evidence"
      return Either.right({
        satisfied: read.satisfied,
        blocker,
        reason: line(read.reason, MAX_REASON_CHARS),
        evidence_summary: line(read.evidence_summary, MAX_EVIDENCE_CHARS)
      })
    }
  })
}

/** How an evaluation is recorded on its goal (DeerFlow's `attach_goal_evaluation`). */
export interface Recorded {
  readonly runId: string
  /** When (ISO 8601): the goal's `updated_at` and the evaluation's `evaluated_at`. */
  readonly at: string
  readonly signature: string
  readonly noProgress: number
  /** The new count, when a continuation follows. */
  readonly continuationCount?: number | undefined
  readonly standDownReason?: string | undefined
}

/** The goal with `verdict` as its last evaluation (its counts updated). */
export const attach = (goal: GoalState, verdict: Verdict, recorded: Recorded): GoalState => ({
  ...goal,
  continuation_count: recorded.continuationCount ?? goal.continuation_count,
  no_progress_count: recorded.noProgress,
  updated_at: recorded.at,
  last_evaluation: {
    satisfied: verdict.satisfied,
    blocker: verdict.blocker,
    reason: verdict.reason,
    evidence_summary: verdict.evidence_summary,
    run_id: recorded.runId,
    evaluated_at: recorded.at,
    progress_key: progressKey(verdict, recorded.signature),
    ...(recorded.standDownReason !== undefined ? { stand_down_reason: recorded.standDownReason } : {})
  }
})

/**
 * The hidden user message asking the agent to go on (DeerFlow's `make_goal_continuation_message`: hidden from the
 * app, marked as a continuation). The objective and the evaluator's texts are escaped: neither can close the block
 * or open another harness tag.
 */
export const continuationMessage = (goal: GoalState, verdict: Verdict): HumanMessage =>
  M.human(
    "<goal_continuation>\n" +
      `Active goal: ${Markup.escapeText(objectiveOf(goal))}\n` +
      `Evaluator result: not satisfied. Blocker: ${verdict.blocker}. ` +
      `Reason: ${Markup.escapeText(verdict.reason === "" ? "No reason provided." : verdict.reason)}\n` +
      `Visible evidence: ${
        Markup.escapeText(verdict.evidence_summary === "" ? "No evidence summary provided." : verdict.evidence_summary)
      }\n` +
      "Continue working toward the active goal. Use the available tools and conversation context. " +
      "Do not ask the user to continue unless you are genuinely blocked.\n" +
      "</goal_continuation>",
    { additional_kwargs: { hide_from_ui: true, [CONTINUATION_KWARG]: true } }
  )
