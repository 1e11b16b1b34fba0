/**
 * DeerFlow's endpoints about a thread's turns (declared in `api/Turns.ts`), over the thread's checkpoints: the
 * pages of its messages (each with the run that wrote it, and the run's feedback on its last answer; those a
 * compaction summarised away included, `MessageHistory`), its token usage (summed from the checkpoints' usage
 * records), the goal
 * (a state update through the `goal` reducer), a run's events (recorded by the gateway's `RunJournal`, paged by
 * `after_seq`, filtered by type and subagent task; a running run's as they are now), and what a run changed in the
 * thread's files (its `workspace_changes` event, `WorkspaceChanges`; `available: false` for a run that changed
 * nothing, as DeerFlow).
 */
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import type { ModelConfig } from "../../../services/AppConfig.js"
import type { RunRecord } from "../../../services/ThreadStore.js"
import * as Goal from "../../../state/GoalEvaluation.js"
import * as M from "../../../state/Message.js"
import type { GoalState, StateUpdate } from "../../../state/ThreadState.js"
import * as Run from "../../Run.js"
import type { DeerFlowApi } from "../api/GatewayApi.js"
import { fail } from "../api/Problem.js"
import { CurrentIdentity } from "../api/Security.js"
import * as TurnsApi from "../api/Turns.js"
import * as Body from "../Body.js"
import * as MessageHistory from "../MessageHistory.js"
import type { Shown } from "../MessageHistory.js"
import * as MessagesPage from "../MessagesPage.js"
import * as Protocol from "../Protocol.js"
import * as RunFeedback from "../RunFeedback.js"
import * as TurnDurations from "../TurnDurations.js"
import * as WorkspaceChanges from "../WorkspaceChanges.js"
import type { ThreadRef } from "./Access.js"
import * as Access from "./Access.js"
import type { QueryValue } from "./Http.js"
import { json, queryBool, queryFirst, queryPositive } from "./Http.js"
import * as Live from "./Live.js"


/** DeerFlow's `context_usage`: the tokens in context, the model's window and the share used (one decimal). */
export const contextUsage = (tokenCount: number, window: number | undefined) => ({
  token_count: tokenCount,
  max_context_tokens: window ?? null,
  percentage: window !== undefined && window > 0 ? Math.round((tokenCount / window) * 1000) / 10 : null
})

/** Whether the app hides a message (a date reminder, a goal continuation). */
export const hidden = TurnDurations.hidden

/** Whether the messages page shows a message (see `MessagesPage.shownOnPage`). */
export const shownOnPage = MessagesPage.shownOnPage

/** The seq of each run's last answer among `rows`. */
const lastAnswerOf = (rows: ReadonlyArray<Shown>) => {
  const last = new Map<string, number>()
  for (const { message, seq, run_id } of rows) if (message.type === "ai") last.set(run_id, seq)
  return last
}

/**
 * The rows of a thread's messages as its pages and list answer them: a run's rating on the answer `feedbackAt` names
 * for it, its `turn_duration` on the one `durationAt` names.
 */
const withRuns = (
  rows: ReadonlyArray<Shown>,
  threadId: string,
  records: ReadonlyMap<string, RunRecord>,
  feedbackAt: ReadonlyMap<string, number>,
  durationAt: ReadonlyMap<string, number>
) =>
  rows.map((shown) => {
    const { seq, run_id } = shown
    const runId = run_id === "" ? null : run_id
    const feedback = runId !== null && feedbackAt.get(runId) === seq
      ? RunFeedback.rating(records.get(runId))
      : undefined
    const duration = runId !== null && durationAt.get(runId) === seq
      ? TurnDurations.turnDuration(records.get(runId))
      : undefined
    return {
      ...MessagesPage.row(shown, threadId, duration),
      feedback: feedback === undefined
        ? null
        : { feedback_id: feedback.feedback_id, rating: feedback.rating, comment: feedback.comment }
    }
  })

/** The turns endpoints of `api` (DeerFlow's, under `/api`). */
export const layer = (api: DeerFlowApi) =>
  HttpApiBuilder.group(api, "turns", (handlers) =>
    Effect.gen(function*() {
      const access = yield* Access.make
      const { store, runs, storeFailed, writeFailed } = access

      const folded = (thread: ThreadRef) =>
        Effect.gen(function*() {
          const records = yield* Effect.mapError(store.checkpoints(thread.stored), storeFailed)
          const result = MessageHistory.fold(records)
          if (Either.isLeft(result)) return yield* fail("internal", result.left.message)
          return { records, ...result.right }
        })

      const runRecords = (stored: string) => Effect.mapError(store.runs({ threadId: stored }), storeFailed)

      // The context window of the thread's model (the last agent call's, by name or provider id), else of the first
      // configured model, as DeerFlow's view falls back to it (the models of `config.yaml` as it is now).
      const now = yield* Live.config
      const windowOf = (models: ReadonlyArray<ModelConfig>, model: string | undefined): number | undefined => {
        const entry = models.find((m) => m.name === model) ?? models.find((m) => m.model === model) ?? models[0]
        return entry?.context_window
      }

      const flag = (name: string, value: QueryValue, fallback: boolean) => {
        const read = queryBool(value, fallback)
        return read !== undefined
          ? Effect.succeed(read)
          : fail("unprocessable", `${name} must be true or false, got ${JSON.stringify(queryFirst(value))}.`)
      }

      /**
       * An update of the thread's state outside a run: refused (409, `busy`) while a run holds it; written under the
       * update's lease, fenced by it (a run that took the thread while the update stalled keeps its steps: 409).
       */
      const writeState = (
        thread: ThreadRef,
        update: StateUpdate,
        busy = `Thread ${thread.threadId} has a run in progress; change it after the run.`
      ) =>
        Effect.gen(function*() {
          if (runs.activeOf(thread.stored) !== undefined) return yield* fail("conflict", busy)
          const writer = `${Protocol.UPDATE_WRITER}${M.newId()}`
          const holder = yield* Effect.mapError(Run.takeLease(store, thread.stored, writer), storeFailed)
          if (holder !== undefined) return yield* fail("conflict", busy)
          yield* store.append(thread.stored, writer, [update], { leased: true }).pipe(
            Effect.mapError(writeFailed(thread.threadId, "this change of its goal")),
            Effect.ensuring(Effect.ignore(store.releaseLease(thread.stored, writer)))
          )
        })

      const currentGoal = (thread: ThreadRef) =>
        Effect.map(access.loadState(thread.stored), (loaded) => loaded.state.goal ?? null)

      return handlers
        .handleRaw("messagesPage", ({ path, urlParams }) =>
          Effect.gen(function*() {
            const { user } = yield* CurrentIdentity
            const thread = yield* access.chatOf(user, path.thread_id)
            if (urlParams.after_seq !== undefined) {
              return yield* fail("unprocessable", "after_seq is not supported by this backward-only endpoint.")
            }
            const limit = yield* queryPositive("limit", urlParams.limit, 50, 200)
            const most = Number.MAX_SAFE_INTEGER
            const before = yield* queryPositive("before_seq", urlParams.before_seq, most, most)
            // a new chat's (its id made up before its first run): no messages yet, as DeerFlow answers it
            if (thread === undefined) {
              return json(TurnsApi.MessagesPage, { data: [], has_more: false, next_before_seq: null })
            }
            const journal = yield* folded(thread)
            const records = new Map((yield* runRecords(thread.stored)).map((r) => [r.run_id, r]))
            // (with the turns a compaction summarised away, as DeerFlow's page reads them from its journal, and
            // those a regenerate that has not succeeded took back)
            const visible = MessagesPage.rows(journal, records).filter(({ message }) => shownOnPage(message))
            const rows = visible.filter(({ seq }) => seq < before)
            const page = rows.slice(Math.max(0, rows.length - limit))
            // a run's rating goes with its last answer in the thread, not the last one of this page (DeerFlow's
            // test_thread_messages_page); its duration with its last answer on this page, as DeerFlow stamps it
            const data = withRuns(page, thread.threadId, records, lastAnswerOf(visible), lastAnswerOf(page))
            const hasMore = page.length < rows.length
            return json(TurnsApi.MessagesPage, {
              data,
              has_more: hasMore,
              next_before_seq: hasMore ? data[0]!.seq : null
            })
          }))
        .handleRaw("messageList", ({ path, urlParams }) =>
          Effect.gen(function*() {
            const { user } = yield* CurrentIdentity
            const thread = yield* access.chatOf(user, path.thread_id)
            const most = Number.MAX_SAFE_INTEGER
            const cursor: MessagesPage.Cursor = {
              limit: yield* queryPositive("limit", urlParams.limit, 50, 200),
              before_seq: yield* queryPositive("before_seq", urlParams.before_seq, undefined, most),
              after_seq: yield* queryPositive("after_seq", urlParams.after_seq, undefined, most)
            }
            // (a thread that does not exist yet has no messages: DeerFlow's journal answers none)
            if (thread === undefined) return json(TurnsApi.MessageList, [])
            const journal = yield* folded(thread)
            const records = new Map((yield* runRecords(thread.stored)).map((r) => [r.run_id, r]))
            const visible = MessagesPage.rows(journal, records).filter(({ message }) => shownOnPage(message))
            const { data: list } = MessagesPage.cut(visible, cursor)
            // a run's rating and duration on its last answer in this list, as DeerFlow's legacy list attaches them
            const last = lastAnswerOf(list)
            return json(TurnsApi.MessageList, withRuns(list, thread.threadId, records, last, last))
          }))
        .handleRaw("tokenUsage", ({ path, urlParams }) =>
          Effect.gen(function*() {
            const { user } = yield* CurrentIdentity
            // (a new chat's thread, before its first run, has used no tokens: DeerFlow's sums are zeros)
            const thread = yield* access.chatOf(user, path.thread_id)
            const records = thread === undefined
              ? []
              : yield* Effect.mapError(store.checkpoints(thread.stored), storeFailed)
            // as DeerFlow's view: runs not yet started are left out, and running ones unless include_active=true
            const includeActive = yield* flag("include_active", urlParams.include_active, false)
            const allRuns = thread === undefined ? [] : yield* runRecords(thread.stored)
            const counted = (run: RunRecord) => run.status !== "pending" && (includeActive || run.status !== "running")
            const runList = allRuns.filter(counted)
            const left = new Set(allRuns.filter((run) => !counted(run)).map((run) => run.run_id))
            const byModel: Record<string, { tokens: number; runs: Set<string> }> = {}
            const byCaller: Record<Protocol.Caller, number> = { lead_agent: 0, subagent: 0, middleware: 0 }
            let input = 0
            let output = 0
            let total = 0
            let lastInput = 0
            let lastModel: string | undefined
            // (runs that booked no usage, `run_events.track_token_usage: false`: the last answer's own usage)
            let booked = false
            const answers = new Set<string>()
            let answer: { readonly input: number; readonly model: unknown } | undefined
            for (const record of records) {
              if (left.has(record.run_id)) continue
              for (const update of record.updates) {
                for (const message of update.messages ?? []) {
                  if (message.type !== "ai" || answers.has(message.id)) continue
                  answers.add(message.id)
                  const spent = message.usage_metadata
                  const model = message.response_metadata?.model_name
                  if (spent !== undefined) answer = { input: spent.input_tokens, model }
                }
                for (const delta of update.token_usage ?? []) {
                  input += delta.input_tokens
                  output += delta.output_tokens
                  total += delta.total_tokens
                  const model = (byModel[delta.model] ??= { tokens: 0, runs: new Set() })
                  model.tokens += delta.total_tokens
                  model.runs.add(record.run_id)
                  const caller = Protocol.callerOf(delta.purpose)
                  byCaller[caller] += delta.total_tokens
                  if (caller === "lead_agent") {
                    lastInput = delta.input_tokens
                    lastModel = delta.model
                    booked = true
                  }
                }
              }
            }
            if (!booked && answer !== undefined) {
              lastInput = answer.input
              lastModel = typeof answer.model === "string" ? answer.model : undefined
            }
            return json(TurnsApi.TokenUsage, {
              thread_id: path.thread_id,
              total_tokens: total,
              total_input_tokens: input,
              total_output_tokens: output,
              total_runs: runList.length,
              by_model: Object.fromEntries(
                Object.entries(byModel).map(([name, m]) => [name, { tokens: m.tokens, runs: m.runs.size }])
              ),
              by_caller: byCaller,
              context_usage: contextUsage(lastInput, windowOf((yield* now).config.models, lastModel))
            })
          }))
        .handleRaw("runEvents", ({ path, urlParams }) =>
          Effect.gen(function*() {
            const { user } = yield* CurrentIdentity
            const thread = yield* access.threadRef(user, path.thread_id)
            yield* access.ownedRun(thread.stored, path.run_id)
            const limit = yield* queryPositive("limit", urlParams.limit, 500, 2000)
            const after = yield* queryPositive("after_seq", urlParams.after_seq, 0, Number.MAX_SAFE_INTEGER)
            const types = queryFirst(urlParams.event_types)?.split(",").map((t) => t.trim()).filter((t) => t !== "")
            const taskId = queryFirst(urlParams.task_id)
            // a run this process runs: its journal as it is now (the store holds it as last kept)
            const live = runs.get(path.run_id)
            const stored = live?.events !== undefined && live.threadId === thread.stored
              ? live.events()
              : yield* Effect.mapError(store.runEvents(thread.stored, path.run_id), storeFailed)
            const events = stored
              .filter((e) =>
                e.seq > after &&
                (types === undefined || types.length === 0 || types.includes(e.event_type)) &&
                (taskId === undefined || e.metadata.task_id === taskId)
              )
              .slice(0, limit)
              .map((e) => ({ thread_id: thread.threadId, run_id: path.run_id, ...e }))
            return json(TurnsApi.EventList, events)
          }))
        .handleRaw("workspaceChanges", ({ path, urlParams }) =>
          Effect.gen(function*() {
            const { user } = yield* CurrentIdentity
            // the user's thread; any run id of it, as DeerFlow reads its event store: a branch's seeded answers
            // name a run (`branch-...`) that no run record holds, and the app asks about it as about any answer
            const thread = yield* access.threadRef(user, path.thread_id)
            const includeFiles = yield* flag("include_files", urlParams.include_files, true)
            const includeDiff = yield* flag("include_diff", urlParams.include_diff, true)
            const events = yield* Effect.mapError(store.runEvents(thread.stored, path.run_id), storeFailed)
            const event = events.findLast((e) => e.event_type === WorkspaceChanges.EVENT_TYPE)
            const recorded = event === undefined ? undefined : WorkspaceChanges.recorded(event)
            if (recorded !== undefined) {
              const files = !includeFiles
                ? []
                : !includeDiff
                ? recorded.files.map((file) => ({ ...file, diff: "" }))
                : recorded.files
              return json(TurnsApi.WorkspaceChanges, {
                available: true,
                version: recorded.version,
                run_id: path.run_id,
                thread_id: thread.threadId,
                summary: recorded.summary,
                files,
                limits: recorded.limits
              })
            }
            return json(TurnsApi.WorkspaceChanges, {
              available: false,
              version: 1,
              run_id: path.run_id,
              thread_id: thread.threadId,
              summary: {
                created: 0,
                modified: 0,
                deleted: 0,
                symlink_created: 0,
                additions: 0,
                deletions: 0,
                truncated: false
              },
              files: [],
              limits: {}
            })
          }))
        .handleRaw("getGoal", ({ path }) =>
          Effect.gen(function*() {
            const { user } = yield* CurrentIdentity
            const thread = yield* access.chatOf(user, path.thread_id)
            return json(TurnsApi.GoalAnswer, { goal: thread === undefined ? null : yield* currentGoal(thread) })
          }))
        .handleRaw("putGoal", ({ path }) =>
          Effect.gen(function*() {
            const { user } = yield* CurrentIdentity
            const request = yield* Body.json(TurnsApi.GoalRequest)
            // the objective as one line of words, as DeerFlow's normalize_goal_objective keeps it
            const objective = request.objective.trim().split(/\s+/).join(" ")
            if (objective === "") return yield* fail("unprocessable", "Goal objective must not be empty.")
            // a new chat holds its thread id before its first run: the goal makes the thread
            const found = yield* Effect.either(access.threadRef(user, path.thread_id))
            const thread: ThreadRef = Either.isRight(found)
              ? found.right
              : { stored: (yield* access.newThread(user, path.thread_id, {})).thread_id, threadId: path.thread_id }
            const at = new Date(yield* Clock.currentTimeMillis).toISOString()
            // a fresh goal, as DeerFlow's build_goal_state: one set again is a new goal (made now, no continuations)
            const goal: GoalState = {
              objective,
              status: "active",
              created_at: at,
              updated_at: at,
              continuation_count: 0,
              max_continuations: request.max_continuations ?? Goal.MAX_CONTINUATIONS,
              no_progress_count: 0,
              max_no_progress_continuations: 2
            }
            yield* writeState(thread, { goal }, "Thread has a run in flight. Set the goal after the run finishes.")
            return json(TurnsApi.GoalAnswer, { goal })
          }))
        .handleRaw("deleteGoal", ({ path }) =>
          Effect.gen(function*() {
            const { user } = yield* CurrentIdentity
            const thread = yield* access.chatOf(user, path.thread_id)
            // DeerFlow's clear_thread_goal reserves the thread before it looks for a goal: a thread a run holds is
            // refused even with no goal, and one it does not hold gets a checkpoint clearing it either way
            if (thread !== undefined) {
              yield* writeState(
                thread,
                { goal: { clear: true } },
                "Thread has a run in flight. Clear the goal after the run finishes."
              )
            }
            return json(TurnsApi.GoalAnswer, { goal: null })
          }))
    }))
