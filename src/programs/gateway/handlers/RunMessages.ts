/**
 * The message lists of one run (declared in `api/RunMessages.ts`), over the thread's history as the messages page
 * reads it (`MessageHistory`, `MessagesPage`): every message the run wrote that the page shows, with the page's
 * `seq` (the thread's one numbering, so a cursor means the same on both), those a compaction summarised away or a
 * later fork took back included, as DeerFlow's journal keeps them. The thread's route stamps the run's
 * `turn_duration` on its last answer of the page, as DeerFlow's; the route by run id alone does not, as DeerFlow's.
 * A run of the user's thread that wrote nothing (or no run of that id: a branch's seeded turns name runs no record
 * holds), or of a thread that does not exist (another user's thread of that id included, `Access.chatOf`), is an
 * empty page, as DeerFlow reads its journal by run id; another user's run by its id alone is a 404.
 */
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import type { DeerFlowApi } from "../api/GatewayApi.js"
import { fail, notFound } from "../api/Problem.js"
import * as RunMessagesApi from "../api/RunMessages.js"
import { CurrentIdentity } from "../api/Security.js"
import * as MessageHistory from "../MessageHistory.js"
import * as MessagesPage from "../MessagesPage.js"
import * as ThreadIds from "../ThreadIds.js"
import * as TurnDurations from "../TurnDurations.js"
import * as Access from "./Access.js"
import type { ThreadRef } from "./Access.js"
import { json, queryPositive } from "./Http.js"

/** The page's cursor of a request's query (DeerFlow's bounds: `limit` 1-200, default 50; seqs from 1). */
const cursorOf = (params: typeof RunMessagesApi.PageParams.Type) =>
  Effect.gen(function*() {
    const most = Number.MAX_SAFE_INTEGER
    return {
      limit: yield* queryPositive("limit", params.limit, 50, 200),
      before_seq: yield* queryPositive("before_seq", params.before_seq, undefined, most),
      after_seq: yield* queryPositive("after_seq", params.after_seq, undefined, most)
    } satisfies MessagesPage.Cursor
  })

/** The run messages endpoints of `api` (DeerFlow's, under `/api`). */
export const layer = (api: DeerFlowApi) =>
  HttpApiBuilder.group(api, "runMessages", (handlers) =>
    Effect.gen(function*() {
      const access = yield* Access.make
      const { store, storeFailed } = access

      /** A page of the messages run `runId` of the user's thread wrote; with `durations`, its turn_duration. */
      const page = (thread: ThreadRef, runId: string, cursor: MessagesPage.Cursor, durations: boolean) =>
        Effect.gen(function*() {
          const records = yield* Effect.mapError(store.checkpoints(thread.stored), storeFailed)
          const folded = MessageHistory.fold(records)
          if (Either.isLeft(folded)) return yield* fail("internal", folded.left.message)
          const { data, has_more } = MessagesPage.cut(MessagesPage.ofRun(folded.right, runId), cursor)
          const [record] = durations && data.length > 0
            ? yield* Effect.mapError(store.runs({ runId }), storeFailed)
            : []
          const duration = record?.thread_id === thread.stored ? TurnDurations.turnDuration(record) : undefined
          const last = duration === undefined ? undefined : data.findLast((row) => row.message.type === "ai")
          const rows = data.map((shown) =>
            MessagesPage.row(shown, thread.threadId, shown === last ? duration : undefined)
          )
          return json(RunMessagesApi.RunMessagesPage, { data: rows, has_more })
        })

      return handlers
        .handleRaw("threadRunMessages", ({ path, urlParams }) =>
          Effect.gen(function*() {
            const { user } = yield* CurrentIdentity
            const thread = yield* access.chatOf(user, path.thread_id)
            const cursor = yield* cursorOf(urlParams)
            // (a thread that does not exist yet has written nothing: DeerFlow's journal answers an empty page)
            if (thread === undefined) return json(RunMessagesApi.RunMessagesPage, { data: [], has_more: false })
            return yield* page(thread, path.run_id, cursor, true)
          }))
        .handleRaw("runMessages", ({ path, urlParams }) =>
          Effect.gen(function*() {
            const { user } = yield* CurrentIdentity
            const cursor = yield* cursorOf(urlParams)
            const [record] = yield* Effect.mapError(store.runs({ runId: path.run_id }), storeFailed)
            if (record === undefined) return yield* notFound(`Run ${path.run_id}`)
            // (the user's thread of the run, or none: another user's run is a run this user does not have)
            const threadId = ThreadIds.publicIdOf(user, record.thread_id)
            const thread = yield* access.threadRef(user, threadId).pipe(
              Effect.catchIf((error) => error.reason === "not_found", () => notFound(`Run ${path.run_id}`))
            )
            if (thread.stored !== record.thread_id) return yield* notFound(`Run ${path.run_id}`)
            return yield* page(thread, path.run_id, cursor, false)
          }))
    }))
