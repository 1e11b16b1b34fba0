/**
 * DeerFlow's goal loop in a gateway run (its worker's `_prepare_goal_continuation_input`): after a turn that ended
 * normally on a thread whose goal is active, a model (the run's, thinking off) judges from the visible conversation
 * whether the goal is met (`GoalEvaluation`). Met: the goal is cleared. Not met yet, within its caps: the evaluation
 * is recorded on the goal, its `continuation_count` one more, and a hidden `<goal_continuation>` message starts
 * another turn in the same run, streamed to the same clients. Otherwise the evaluation is recorded with why the loop
 * stood down. Each change of the goal reaches the run's stream as a state update (a `values` event with the goal).
 *
 * The turns' own `run_start` and `run_end` are the run's: the continuations' `run_start` is left out and each turn's
 * `run_end` is held until no turn follows, so the run starts and ends once. The run's record says `running` until
 * the run settles it (`RunSettlement`), so a run stopped while the evaluator judges ends `cancelled`. The
 * evaluator's failure (the model failing, an answer that is no verdict, the store) ends the loop, never the run: the
 * run ends as its turn did. A thread with no goal costs one look at the run's state.
 */
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import type { ModelService } from "../../services/ModelService.js"
import type { RunEndEvent, RunEvent, StopReason } from "../../services/RunEvents.js"
import { RunSettlement } from "../../services/RunSettlement.js"
import type { ThreadStore } from "../../services/ThreadStore.js"
import * as Goal from "../../state/GoalEvaluation.js"
import type { Message } from "../../state/Message.js"
import type { GoalState, GoalUpdate } from "../../state/ThreadState.js"
import * as Run from "../Run.js"
import * as ThreadLease from "../ThreadLease.js"
import * as OneShot from "./OneShot.js"
import { now } from "./RunModel.js"

/** The `internal` purpose of the evaluator's model call. */
export const PURPOSE = "goal_evaluator"

/**
 * One turn of the run: its new messages in, its events out (with its own `run_start` and `run_end`); `continuing`:
 * a goal's continuation (not the user's turn).
 */
export type Turn = (
  messages: ReadonlyArray<Message>,
  onEvent: (event: RunEvent) => void,
  continuing: boolean
) => Effect.Effect<void>

/** What the loop needs of the run. */
export interface Options {
  /**
   * Where the goal's changes are written: the run's (a run given request secrets writes through
   * `RunSecretsStore.hiding`: the evaluator is a model, and may write out a value it read in a form nothing masks).
   */
  readonly store: ThreadStore["Type"]
  /**
   * What the loop logs and the evaluator's answer is read as, without the secrets the run hides (the process's, its
   * request's); as it is when absent.
   */
  readonly redact?: ((text: string) => string) | undefined
  /** The evaluator's model clients as the configuration is now (none: no loop). */
  readonly model: Effect.Effect<ModelService["Type"] | undefined>
  readonly threadId: string
  readonly runId: string
  readonly userId: string
  /**
   * The model the evaluator asks: the run's, as its role may use it (resolved as the run's turns are; it fails when
   * the role may use none: no verdict).
   */
  readonly modelName: Effect.Effect<string | undefined, { readonly message: string }>
  /** Whether the thread has a goal now (the run's state: no store read). */
  readonly hasGoal: () => boolean
}

/** The loop's options with where the run's events go (a change of the goal is streamed as a state update). */
export interface Emitting extends Options {
  readonly emit: (event: RunEvent) => void
}

/**
 * Runs the turns of a run: `first` with the run's messages, then a continuation while the goal loop asks for one.
 * Events reach `onEvent` as the run's, one `run_start` and one `run_end`.
 */
export const drive = (
  options: Options,
  turn: Turn,
  first: ReadonlyArray<Message>,
  onEvent: (event: RunEvent) => void
): Effect.Effect<void> =>
  Effect.gen(function*() {
    let messages = first
    let continuing = false
    // a cap the user's turn hit stays the run's stop reason, as DeerFlow keeps it (#4176)
    let capped: StopReason | undefined
    for (;;) {
      let end: RunEndEvent | undefined
      const hidden = continuing
      yield* turn(messages, (event) => {
        if (event.type === "run_end") end = event
        else if (!(hidden && event.type === "run_start")) onEvent(event)
      }, hidden)
      // (none: the turn was stopped, and the run ends as stopped)
      if (end === undefined) return
      const ended: RunEndEvent = end
      const judged = ended.status === "success" && options.hasGoal()
      const next = judged ? yield* continuation({ ...options, emit: onEvent }) : Option.none()
      if (Option.isSome(next)) {
        if (capped === undefined && ended.stop_reason !== "completed") capped = ended.stop_reason
        messages = [next.value]
        continuing = true
        continue
      }
      // (the run's record is settled by the run, once, with this end: see `RunSettlement`)
      onEvent(capped !== undefined && ended.status === "success" && ended.stop_reason === "completed"
        ? { ...ended, stop_reason: capped }
        : ended)
      return
    }
  })

/**
 * After a turn that succeeded on a thread with a goal: the evaluation, recorded, and the continuation message when
 * another turn follows. Never fails (a failure is logged and ends the loop); stopping the run interrupts it.
 */
export const continuation = (options: Emitting): Effect.Effect<Option.Option<Message>> => {
  const { store, threadId, runId } = options
  return Effect.gen(function*() {
    const loaded = yield* store.load(threadId)
    if (Option.isNone(loaded)) return Option.none()
    const goal = loaded.value.state.goal
    if (goal === null || goal.status !== "active") return Option.none()
    const messages = loaded.value.state.messages
    const signature = Goal.evidenceSignature(messages)
    const recordVerdict = (verdict: Goal.Verdict, extra: { continuationCount?: number; standDownReason?: string }) =>
      Effect.flatMap(now, (evaluatedAt) =>
        write(options, Goal.attach(goal, verdict, {
          runId,
          at: evaluatedAt,
          signature,
          noProgress: Goal.noProgressCount(goal, verdict, signature),
          ...extra
        })))
    if (!Goal.endsWithAnswer(messages)) {
      yield* recordVerdict(Goal.noReceipt, { standDownReason: "no_durable_end_of_turn" })
      return Option.none()
    }
    const verdict = yield* evaluate(options, goal, messages)
    if (verdict === undefined) return Option.none()
    if (verdict.satisfied) {
      yield* write(options, { clear: true })
      return Option.none()
    }
    const noProgress = Goal.noProgressCount(goal, verdict, signature)
    const standDown = Goal.standDownReason(goal, verdict, noProgress)
    if (standDown !== undefined) {
      yield* recordVerdict(verdict, { standDownReason: standDown })
      return Option.none()
    }
    const next = Goal.attach(goal, verdict, {
      runId,
      at: yield* now,
      signature,
      noProgress,
      continuationCount: goal.continuation_count + 1
    })
    if (!(yield* write(options, next))) return Option.none()
    yield* Effect.logInfo(
      `run ${runId} continuing thread ${threadId} for its goal (${next.continuation_count}/${next.max_continuations})`
    )
    return Option.some<Message>(Goal.continuationMessage(next, verdict))
  }).pipe(
    Effect.catchAll((error) =>
      Effect.as(Effect.logWarning(`Goal not evaluated for thread ${threadId} after run ${runId}: ${error.message}`),
        Option.none())
    ),
    Effect.catchAllDefect((defect) =>
      Effect.as(
        Effect.logWarning(`Goal not evaluated for thread ${threadId} after run ${runId}`, defect),
        Option.none()
      )
    ),
    Effect.withSpan("GoalLoop.continuation", { attributes: { thread: threadId, run: runId } })
  )
}

// the evaluator's verdict on the goal (none when there is no model, or it failed: logged)
const evaluate = (options: Options, goal: GoalState, messages: ReadonlyArray<Message>) =>
  Effect.gen(function*() {
    const conversation = Goal.conversation(messages)
    if (conversation === "") return Goal.noEvidence
    const model = yield* options.model
    if (model === undefined) return undefined
    const modelName = yield* Effect.either(options.modelName)
    const answer = Either.isLeft(modelName) ? modelName : yield* Effect.either(OneShot.text(model, {
      purpose: PURPOSE,
      system: Goal.SYSTEM_PROMPT,
      user: Goal.userPrompt(goal, conversation),
      modelName: modelName.right,
      userId: options.userId
    }))
    // (the answer masked before its texts are cut to the verdict's bounds: a cut inside a key would keep its beginning)
    const verdict: Either.Either<Goal.Verdict, { readonly message: string }> = Either.isRight(answer)
      ? Goal.parseVerdict(options.redact === undefined ? answer.right : options.redact(answer.right))
      : Either.left(answer.left)
    if (Either.isLeft(verdict)) {
      // (an answer that is no verdict is quoted in its error: the evaluator may have written a value out)
      const why = options.redact === undefined ? verdict.left.message : options.redact(verdict.left.message)
      yield* Effect.logWarning(
        `Goal evaluator failed for thread ${options.threadId} after run ${options.runId}: ${why}`
      )
      return undefined
    }
    return verdict.right
  })

/**
 * The goal changed in the thread (a checkpoint of the run's, under its lease) and in the run's stream; false when
 * another run holds the thread now.
 */
const write = (options: Emitting, goal: GoalUpdate) =>
  Effect.gen(function*() {
    // (the run's lease is its manager's, which renews it and says whether the run lost it: `RunSettlement`)
    const settlement = Option.filter(yield* Effect.serviceOption(RunSettlement), (s) => s.settles(options.runId))
    const ttlMs = yield* Run.LeaseTtl
    const lease = Run.takeLease(options.store, options.threadId, options.runId, ttlMs)
    const holder = Option.isSome(settlement) ? settlement.value.lost() : yield* lease
    if (holder !== undefined) return false
    const update = { goal }
    // (fenced by the lease in the store: refused once another took it, also since the look above)
    const confirm = Option.isSome(settlement) ? settlement.value.confirm : Effect.orElseSucceed(lease, () => undefined)
    yield* ThreadLease.appendLeased(options.store, options.threadId, options.runId, [update], ttlMs, confirm)
    options.emit({ type: "state", update })
    return true
  })
