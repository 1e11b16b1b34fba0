/**
 * The threads endpoints (declared in `api/Threads.ts`): a user's threads, their state after each checkpoint,
 * its history, and state updates (refused while a run holds the thread, for fields the server owns, and when
 * they do not apply).
 */
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { AppConfigService } from "../../../services/AppConfig.js"
import { isStagingFile } from "../../../middleware/Uploads.js"
import * as ThreadData from "../../../middleware/ThreadData.js"
import { isSafeId, threadPaths } from "../../../services/Sandbox.js"
import type { LeaseHolder, ThreadSummary } from "../../../services/ThreadStore.js"
import { METADATA_BOUND, ThreadStore } from "../../../services/ThreadStore.js"
import * as M from "../../../state/Message.js"
import { applyUpdates } from "../../../state/Reducers.js"
import type { StateUpdate } from "../../../state/ThreadState.js"
import * as TS from "../../../state/ThreadState.js"
import * as App from "../../App.js"
import * as Run from "../../Run.js"
import * as ThreadLease from "../../ThreadLease.js"
import { DEERFLOW_PREFIX, type LangGraphApi } from "../api/GatewayApi.js"
import { describeParseError, fail, GatewayError } from "../api/Problem.js"
import { CurrentIdentity } from "../api/Security.js"
import * as Threads from "../api/Threads.js"
import { DEFAULT_USER } from "../Auth.js"
import * as Body from "../Body.js"
import * as Crons from "../Crons.js"
import { matchesFilter } from "../JsonEquality.js"
import * as Fork from "../Fork.js"
import * as InputBounds from "../InputBounds.js"
import * as Protocol from "../Protocol.js"
import { TaskStore } from "../scheduler/TaskStore.js"
import * as StorageQuota from "../StorageQuota.js"
import * as ThreadIds from "../ThreadIds.js"
import * as Access from "./Access.js"
import * as ThreadHistory from "./ThreadHistory.js"
import { json, prefixOf, queryList, selectFields } from "./Http.js"

const UpdateFields = TS.StateUpdate.pipe(Schema.omit("messages"))
const SERVER_FIELDS: ReadonlyArray<string> = ["thread_data", "sandbox", "viewed_images"]

/** The metadata key DeerFlow's app pins a thread with. */
const PINNED = "deerflow_pinned"

/** What the lease of a thread being copied (`POST /threads/{id}/copy`) is held by: this and the copy's id. */
const COPY_WRITER = "copy-thread-"

/** What holds the storage quota reservation of a thread made with metadata, and of a thread's metadata grown. */
const CREATE_WRITER = "create-thread-"
const PATCH_WRITER = "patch-thread-"

/** What a deletion that failed (the store, or removing the thread's files) answers: DeerFlow's words, no path. */
const DELETE_FAILED = "Failed to delete local thread data."

/** DeerFlow's refusal of a state update while a run holds the thread (409). */
const STATE_BUSY = "Thread has a run in flight. Update state after the run finishes."

/** Why a thread cannot be deleted now: `holder` (a run, a state update or a copy) holds it. */
const heldMessage = (threadId: string, holder: LeaseHolder): string =>
  holder.run_id.startsWith(COPY_WRITER)
    ? `Thread ${threadId} is being copied (its checkpoints are being written); delete it once the copy is done.`
    : holder.run_id.startsWith(Protocol.UPDATE_WRITER)
    ? `Thread ${threadId} has a state update in progress; try again.`
    : `Thread ${threadId} has a run in progress (run ${holder.run_id}); cancel it, then delete the thread.`

/** The threads endpoints of `api` (the LangGraph API under one of its prefixes). */
export const layer = (api: LangGraphApi) =>
  HttpApiBuilder.group(api, "threads", (handlers) =>
    Effect.gen(function*() {
      const access = yield* Access.make
      const tasks = yield* TaskStore
      const { store, runs, storeFailed, writeFailed, ownedThread, newThread, loadState, fullThread } = access
      const app = yield* AppConfigService
      const bounds = InputBounds.fromConfig(app.config.gateway)
      const maxPageBytes = app.config.gateway.max_page_bytes

      const { currentState, getHistory, stateAt } = ThreadHistory.make(access, maxPageBytes)

      /**
       * The user's threads (and no one else's) that the filters of a search or a count keep, as thread objects
       * whose values hold only the title.
       */
      const matching = (
        userId: string,
        request: typeof Threads.ThreadCount.Type & { readonly ids?: ReadonlyArray<string> | null | undefined }
      ) =>
        Effect.gen(function*() {
          // (the user's threads only, read by their owner; a thread made without one is the CLI's, `default`'s)
          const mine = yield* Effect.mapError(store.listOwned(userId, userId === DEFAULT_USER), storeFailed)
          const wanted = request.metadata ?? {}
          const ids = request.ids == null ? undefined : new Set(request.ids)
          const candidates = mine
            .map((thread) => ({ thread, threadId: ThreadIds.publicIdOf(userId, thread.thread_id) }))
            .filter(({ thread, threadId }) =>
              (ids === undefined || ids.has(threadId)) &&
              matchesFilter(thread.metadata, wanted)
            )
          // a values filter reads the state of each thread the other filters kept
          const wantedValues = request.values ?? {}
          const kept = Object.keys(wantedValues).length === 0 ? candidates : yield* Effect.filter(
            candidates,
            ({ thread, threadId }) =>
              Effect.map(fullThread(thread, threadId), (full) =>
                matchesFilter(full.values as Record<string, unknown>, wantedValues)),
            { concurrency: 4 }
          )
          return kept.map(({ thread, threadId }) =>
            Protocol.threadObject({ ...thread, thread_id: threadId }, access.threadStatus(thread), {
              title: thread.title
            })
          ).filter((thread) => request.status == null || thread.status === request.status)
        })

      /**
       * Deletes the user's thread `threadId` (404 when they have none), its runs, files and crons; its active run is
       * cancelled first, and a run of another gateway process sharing the store refuses it (409).
       */
      /** Who holds the stored thread's lease now, if anyone (taken and given back at once when no one does). */
      const heldBy = (stored: string) =>
        Effect.gen(function*() {
          const probe = `${Protocol.UPDATE_WRITER}${M.newId()}`
          const holder = yield* Effect.mapError(Run.takeLease(store, stored, probe), storeFailed)
          if (holder === undefined) yield* Effect.ignore(store.releaseLease(stored, probe))
          return holder
        })

      const deleteOwned = (userId: string, threadId: string) =>
        Effect.gen(function*() {
          const stored = (yield* ownedThread(userId, threadId)).thread_id
          const active = runs.activeOf(stored)
          if (active !== undefined) yield* Effect.ignore(runs.cancel(active.runId, "interrupt", true))
          // a run of another gateway process sharing the store still holds the thread
          if ((yield* ownedThread(userId, threadId)).status === "running") {
            return yield* fail(
              "conflict",
              `Thread ${threadId} has a run in progress in another gateway process; cancel it there, then ` +
                "delete the thread."
            )
          }
          // (the store refuses while anything holds the thread's lease: a run, a state update or a copy, here 409)
          yield* App.deleteThread(app.home, stored, userId).pipe(
            Effect.provideService(ThreadStore, store),
            Effect.catchAll((error) =>
              Effect.flatMap(heldBy(stored), (holder) =>
                holder !== undefined
                  ? fail("conflict", heldMessage(threadId, holder))
                  // (the cause, which names host paths, is logged, not answered: DeerFlow's generic 500)
                  : Effect.zipRight(
                    Effect.logError(`deleting thread ${threadId} failed: ${error.message}`),
                    fail("internal", DELETE_FAILED)
                  )
              )
            )
          )
          // its crons go with it
          yield* Effect.mapError(Crons.removeThreadCrons(tasks, userId, threadId), storeFailed)
        })

      return handlers
        // LangGraph's `if_exists` (`raise`, the default: 409; `do_nothing`: the existing thread) is about the
        // caller's own thread of that id; another user's is, for the caller, a thread that does not exist
        .handleRaw("createThread", () =>
          Effect.gen(function*() {
            const { user: userId } = yield* CurrentIdentity
            const request = yield* Body.json(Threads.ThreadCreate)
            const threadId = request.thread_id ?? M.newId()
            const existing = isSafeId(threadId)
              ? yield* Effect.mapError(ThreadIds.find(store, userId, threadId), storeFailed)
              : Option.none<ThreadSummary>()
            if (Option.isSome(existing)) {
              // DeerFlow's gateway (`/api/threads`) makes a thread idempotently: its app uploads a new chat's files
              // (which makes the thread) before its SDK creates the thread; LangGraph's paths raise by default
              const deerflow = (yield* HttpServerRequest.HttpServerRequest).url.startsWith("/api/threads")
              const ifExists = request.if_exists ?? (deerflow ? "do_nothing" : "raise")
              if (ifExists !== "do_nothing") {
                return yield* fail("conflict", `Thread ${threadId} already exists.`)
              }
              return json(Threads.ThreadObject, yield* fullThread(existing.value, threadId))
            }
            // (its metadata is kept with the thread: within the user's storage quota, reserved until it is made)
            const making = newThread(userId, threadId, request.metadata ?? {})
            const made = Object.keys(request.metadata ?? {}).length === 0 ? yield* making : yield* access.withinStorage(
              userId,
              ThreadIds.storedIds(userId, threadId)[0]!,
              `${CREATE_WRITER}${M.newId()}`,
              InputBounds.jsonBytes(request.metadata),
              making
            )
            return json(Threads.ThreadObject, yield* fullThread(made, threadId))
          }))
        .handleRaw("searchThreads", ({ request: http }) =>
          Effect.gen(function*() {
            const { user: userId } = yield* CurrentIdentity
            const request = yield* Body.json(Threads.ThreadSearch)
            const matches = yield* matching(userId, request)
            const sortBy = request.sort_by ?? "updated_at"
            const order = request.sort_order === "asc" ? 1 : -1
            const deerflow = prefixOf(http.url) === DEERFLOW_PREFIX
            // DeerFlow's own route answers the threads its app pinned (`metadata.deerflow_pinned: true`) first, so
            // that the sidebar's first page has them however old they are (DeerFlow's test_threads_router)
            const pinned = (thread: (typeof matches)[number]) =>
              deerflow && (thread.metadata as Record<string, unknown> | null)?.[PINNED] === true ? 1 : 0
            matches.sort((a, b) =>
              pinned(b) - pinned(a) || order * String(a[sortBy]).localeCompare(String(b[sortBy]))
            )
            const offset = request.offset ?? 0
            // (a search naming no limit: DeerFlow's route answers up to 100 threads, LangGraph's 10)
            const page = matches.slice(offset, offset + (request.limit ?? (deerflow ? 100 : 10)))
            // DeerFlow's own route (`/api/threads/search`) answers whole threads whatever `select` names, as
            // DeerFlow's gateway does (its web app sends one); LangGraph's routes answer only the fields named
            const select = deerflow ? undefined : request.select
            return json(Threads.ThreadList, page.map((thread) => selectFields(thread, select)))
          }))
        .handleRaw("countThreads", () =>
          Effect.gen(function*() {
            const { user: userId } = yield* CurrentIdentity
            const request = yield* Body.json(Threads.ThreadCount)
            return json(Schema.Int, (yield* matching(userId, request)).length)
          }))
        .handleRaw("getThread", ({ path }) =>
          Effect.gen(function*() {
            const { user: userId } = yield* CurrentIdentity
            const thread = yield* ownedThread(userId, path.thread_id)
            return json(Threads.ThreadObject, yield* fullThread(thread, path.thread_id))
          }))
        .handleRaw("patchThread", ({ path }) =>
          Effect.gen(function*() {
            const { user: userId } = yield* CurrentIdentity
            const threadId = path.thread_id
            const owned = yield* ownedThread(userId, threadId)
            const stored = owned.thread_id
            const request = yield* Body.json(Threads.ThreadPatch)
            // pinning or unpinning a chat is no activity on it: its place among the others stays (as DeerFlow's)
            const patch = request.metadata ?? {}
            // (patches merge: what they make is bounded as what one sets)
            const merged = Buffer.byteLength(JSON.stringify({ ...owned.metadata, ...patch }))
            if (merged > Threads.MAX_METADATA_BYTES) {
              return yield* fail(
                "unprocessable",
                `metadata: the thread's metadata would be ${merged} bytes of JSON, more than ` +
                  `${Threads.MAX_METADATA_BYTES} (64 KiB), the most metadata may hold.`
              )
            }
            // (what it grows the thread by is kept with it: within the storage quotas)
            const growth = merged - Buffer.byteLength(JSON.stringify(owned.metadata ?? {}))
            const pinOnly = Object.keys(patch).length > 0 && Object.keys(patch).every((key) => key === PINNED)
            // (the bound checked again where the patch is written: patches sent together each passed the check above
            // against the metadata as it was before the others)
            const patching = store.patchMetadata(stored, patch, {
              touch: !pinOnly,
              maxBytes: Threads.MAX_METADATA_BYTES
            }).pipe(
              Effect.mapError((error) =>
                error.operation === METADATA_BOUND
                  ? new GatewayError({
                    reason: "unprocessable",
                    message: `metadata: ${error.message} (64 KiB), the most metadata may hold.`
                  })
                  : storeFailed(error)
              )
            )
            // (what it grows the thread by, reserved until it is kept: `withinStorage`)
            yield* growth > 0
              ? access.withinStorage(userId, stored, `${PATCH_WRITER}${M.newId()}`, growth, patching)
              : patching
            return json(Threads.ThreadObject, yield* fullThread(yield* ownedThread(userId, threadId), threadId))
          }))
        // DeerFlow's own route (`/api/threads/{id}`, which its web app calls after the SDK's delete) answers 200 with
        // DeerFlow's body; LangGraph's routes answer LangGraph's 204 without one
        .handleRaw("deleteThread", ({ path, request: http }) =>
          Effect.gen(function*() {
            const { user: userId } = yield* CurrentIdentity
            yield* deleteOwned(userId, path.thread_id)
            return prefixOf(http.url) === DEERFLOW_PREFIX
              ? json(Threads.ThreadDeleted, {
                success: true,
                message: `Deleted local thread data for ${path.thread_id}`
              })
              : HttpServerResponse.empty({ status: 204 })
          }))
        // LangGraph's prune: `delete` deletes each thread as `DELETE /threads/{id}` does, an id of no thread of
        // the user's (another user's) not pruned, nor one a run of another gateway process holds; `keep_latest`
        // would squash a thread's checkpoints into one, which the store cannot do
        .handleRaw("pruneThreads", () =>
          Effect.gen(function*() {
            const { user: userId } = yield* CurrentIdentity
            const request = yield* Body.json(Threads.ThreadPrune)
            if (request.strategy === "keep_latest") {
              return yield* fail(
                "unprocessable",
                "strategy: keep_latest is not supported: a thread's state is made of all its checkpoints, which " +
                  "the store keeps; prune with strategy delete, or delete single runs (DELETE " +
                  "/threads/{thread_id}/runs/{run_id})."
              )
            }
            let pruned = 0
            for (const threadId of new Set(request.thread_ids)) {
              const deleted = yield* Effect.either(deleteOwned(userId, threadId))
              if (Either.isRight(deleted)) pruned++
              else if (deleted.left.reason !== "not_found" && deleted.left.reason !== "conflict") {
                return yield* deleted.left
              }
            }
            return json(Threads.ThreadPruned, { pruned_count: pruned })
          }))
        // LangGraph's copy: a new thread (a new id, also in its metadata) with the thread's checkpoints, here
        // appended again in order (under new checkpoint ids), and its files; not its runs. Within the user's quotas:
        // one more thread, the bytes of the thread's files, and what the thread keeps in the database
        .handleRaw("copyThread", ({ path }) =>
          Effect.gen(function*() {
            const { user: userId } = yield* CurrentIdentity
            const source = yield* ownedThread(userId, path.thread_id)
            const records = yield* Effect.mapError(store.checkpoints(source.thread_id), storeFailed)
            const copyId = M.newId()
            const adding = yield* access.quotas.threadBytes(userId, source.thread_id)
            const kept = yield* Effect.mapError(store.bytesOf(source.thread_id), storeFailed)
            // the copy holds its thread as a run does, by its lease, taken before the thread is made (under the id
            // it will be stored under: the first of a fresh id's) and kept until the last checkpoint is in: a delete
            // meanwhile is refused, not let through to leave the checkpoints written after it with no thread
            const leased = ThreadIds.storedIds(userId, copyId)[0]!
            const writer = `${COPY_WRITER}${copyId}`
            const hold = Effect.mapError(Run.takeLease(store, leased, writer), storeFailed)
            // (what the thread keeps, reserved under the copy's lease until the copy is done, freed by each
            // checkpoint it copies: `filling`)
            yield* access.filling(userId, leased, writer, kept?.bytes ?? 0, (copied) => Effect.gen(function*() {
              if ((yield* hold) !== undefined) return yield* fail("internal", `Thread ${copyId} is held by another.`)
              yield* access.withBytes(userId, adding, Effect.gen(function*() {
                const made = yield* newThread(userId, copyId, { ...source.metadata, thread_id: copyId })
                const paths = threadPaths(app.home, userId, made.thread_id)
                // the copy's own directories and sandbox: the thread's are the thread's
                const rebound = (update: StateUpdate): StateUpdate => {
                  const { sandbox: _, ...rest } = update
                  return rest.thread_data == null ? rest : { ...rest, thread_data: ThreadData.threadDataOf(paths) }
                }
                yield* Effect.gen(function*() {
                  const files = yield* App.copyThreadFiles(
                    app.home,
                    userId,
                    source.thread_id,
                    made.thread_id,
                    isStagingFile
                  )
                  if (files === "failed") {
                    return yield* fail("internal", `The files of thread ${path.thread_id} could not be copied.`)
                  }
                  if (made.thread_id !== leased) {
                    return yield* fail("internal", `Thread ${copyId} was not made under the id it holds.`)
                  }
                  // (renewed as a run's, for a copy of many checkpoints)
                  let renewed = yield* Clock.currentTimeMillis
                  for (const { run_id, updates } of records) {
                    if ((yield* Clock.currentTimeMillis) - renewed > Run.LEASE_TTL_MS / 3) {
                      if ((yield* hold) !== undefined) return yield* fail("internal", `Thread ${copyId} was taken.`)
                      renewed = yield* Clock.currentTimeMillis
                    }
                    const written = updates.map(rebound)
                    // (fenced by the copy's lease: a run that took the copy after it stalled keeps its steps)
                    yield* Effect.mapError(
                      store.append(made.thread_id, run_id, written, { leased: writer }),
                      writeFailed(copyId, `its copy of thread ${path.thread_id}`)
                    )
                    yield* copied(written)
                  }
                }).pipe(Effect.tapError(() =>
                  Effect.ignore(Effect.andThen(
                    store.releaseLease(leased, writer),
                    Effect.provideService(App.deleteThread(app.home, made.thread_id, userId), ThreadStore, store)
                  ))
                ))
              })).pipe(Effect.ensuring(Effect.ignore(store.releaseLease(leased, writer))))
            }))
            return json(Threads.ThreadObject, yield* fullThread(yield* ownedThread(userId, copyId), copyId))
          }))
        .handleRaw("getState", ({ path }) =>
          Effect.gen(function*() {
            const { user: userId } = yield* CurrentIdentity
            const thread = yield* access.threadRef(userId, path.thread_id)
            return json(Threads.StateObject, yield* currentState(thread))
          }))
        .handleRaw("updateState", ({ path, request: http }) =>
          Effect.gen(function*() {
            const { user: userId } = yield* CurrentIdentity
            const thread = yield* access.threadRef(userId, path.thread_id)
            const { stored, threadId } = thread
            const request = yield* Body.json(Threads.StateUpdateRequest)
            const values = request.values ?? {}
            if (typeof values !== "object" || Array.isArray(values)) {
              return yield* fail("unprocessable", "values: expected an object of state fields")
            }
            const { messages: rawMessages, ...fields } = values as Record<string, unknown>
            // fields that name host resources: ViewImage reads `viewed_images` files and sends them to the model,
            // a run writes large tool outputs to the `sandbox` bound, `thread_data` holds the thread's directories
            const serverOwn = SERVER_FIELDS.find((field) => Object.hasOwn(fields, field))
            if (serverOwn !== undefined) {
              return yield* fail(
                "unprocessable",
                `values.${serverOwn} is the server's own field (it names host resources); clients cannot set it.`
              )
            }
            const list = rawMessages === undefined
              ? undefined
              : Array.isArray(rawMessages)
              ? rawMessages
              : [rawMessages]
            // (bounded as a run's input: each message, all of them, and the whole update, which every later
            // checkpoint of the thread keeps)
            const tooLarge = (list === undefined
              ? undefined
              : InputBounds.messagesProblem(list, "values.messages", bounds) ??
                InputBounds.totalProblem([list], "values.messages", bounds)) ??
              InputBounds.totalProblem([values], "values", bounds)
            if (tooLarge !== undefined) return yield* fail("too_large", tooLarge)
            const decoded = Schema.decodeUnknownEither(UpdateFields, { errors: "all", onExcessProperty: "error" })(
              fields
            )
            if (Either.isLeft(decoded)) {
              return yield* fail("unprocessable", `values: ${describeParseError(decoded.left)}`)
            }
            // (a title is answered with every thread of a search: bounded as a run's `input.title`)
            if ((decoded.right.title?.length ?? 0) > Protocol.MAX_INPUT_TITLE) {
              return yield* fail("unprocessable", `values.title: at most ${Protocol.MAX_INPUT_TITLE} characters.`)
            }
            const update: { -readonly [K in keyof StateUpdate]: StateUpdate[K] } = { ...decoded.right }
            if (list !== undefined) {
              const removals = list.filter((m) =>
                typeof m === "object" && m !== null && (m as { type?: unknown }).type === "remove"
              )
              const others = list.filter((m) => !removals.includes(m))
              const messages = yield* Either.match(Protocol.inputMessages({ messages: others }), {
                onLeft: (message) => Effect.fail(fail("unprocessable", `values.${message.replace(/^input\./, "")}`)),
                onRight: Effect.succeed
              })
              update.messages = [
                ...messages,
                ...removals.map((m) => M.remove(String((m as { id?: unknown }).id)))
              ]
            }
            const writer = `${Protocol.UPDATE_WRITER}${M.newId()}`
            // (reserved under the update's lease until its checkpoint is kept or refused: `withinStorage`)
            const appended = yield* access.withinStorage(userId, stored, writer, InputBounds.jsonBytes(update),
              Effect.gen(function*() {
                // (DeerFlow's words for a run holding the thread, this process's or another's)
                if (runs.activeOf(stored) !== undefined) return yield* fail("conflict", STATE_BUSY)
                const holder = yield* Effect.mapError(Run.takeLease(store, stored, writer), storeFailed)
                if (holder !== undefined) {
                  return yield* fail(
                    "conflict",
                    holder.run_id.startsWith(COPY_WRITER)
                      ? `Thread ${threadId} is being copied; update its state once the copy is done.`
                      : holder.run_id.startsWith(Protocol.UPDATE_WRITER)
                      ? `Thread ${threadId} has a state update in progress; try again.`
                      : STATE_BUSY
                  )
                }
                // an update that does not apply to the thread (removing a message it does not have) is refused, not
                // stored: stored, it would make every later load of the thread fail
                return yield* Effect.either(Effect.gen(function*() {
                  const current = yield* loadState(stored)
                  // given an older checkpoint (LangGraph's time travel), the update applies to the state there: one
                  // checkpoint brings the thread back to it (as a run from that checkpoint forks it) and updates it
                  const checkpointId = Fork.requestedCheckpoint(request)
                  const reset = checkpointId === undefined
                    ? []
                    : (yield* Effect.provideService(Fork.resetTo(stored, checkpointId), ThreadStore, store)).updates
                  const updates = [...reset, update]
                  const applied = applyUpdates(current.state, updates)
                  if (Either.isLeft(applied)) return yield* fail("unprocessable", `values: ${applied.left.message}`)
                  // (fenced by the update's lease: a run that took the thread after it stalled keeps its steps)
                  return yield* store.append(stored, writer, updates, { leased: true }).pipe(
                    Effect.mapError((error) =>
                      ThreadLease.isFenced(error) ? writeFailed(threadId, "its state update")(error) : error
                    )
                  )
                })).pipe(Effect.ensuring(Effect.ignore(store.releaseLease(stored, writer))))
              }))
            if (Either.isLeft(appended)) {
              return yield* appended.left instanceof GatewayError
                ? appended.left
                : StorageQuota.isStopped(appended.left)
                ? storeFailed(appended.left)
                : fail("unprocessable", appended.left.message)
            }
            const latest = yield* currentState(thread)
            // DeerFlow's own route answers the state the update made (values, `checkpoint_id`, ...), as DeerFlow's
            // gateway does; LangGraph's routes answer LangGraph's `{checkpoint}`
            return prefixOf(http.url) === DEERFLOW_PREFIX
              ? json(Threads.StateObject, latest)
              : json(Threads.StateUpdated, { checkpoint: latest.checkpoint })
          }))
        .handleRaw("getStateAtCheckpoint", ({ path }) =>
          Effect.gen(function*() {
            const { user: userId } = yield* CurrentIdentity
            const thread = yield* access.threadRef(userId, path.thread_id)
            const request = yield* Body.json(Threads.CheckpointRequest)
            if (request.checkpoint.checkpoint_id == null) {
              return json(Threads.StateObject, yield* currentState(thread))
            }
            return json(Threads.StateObject, yield* stateAt(thread, request.checkpoint.checkpoint_id))
          }))
        .handleRaw("getStateAt", ({ path }) =>
          Effect.gen(function*() {
            const { user: userId } = yield* CurrentIdentity
            const thread = yield* access.threadRef(userId, path.thread_id)
            return json(Threads.StateObject, yield* stateAt(thread, path.checkpoint_id))
          }))
        .handleRaw("getHistory", ({ path, urlParams }) =>
          Effect.gen(function*() {
            const { user: userId } = yield* CurrentIdentity
            const thread = yield* access.threadRef(userId, path.thread_id)
            // what `POST .../history` takes (`HistoryRequest`)
            const text = queryList(urlParams.limit)[0]
            const limit = text === undefined ? 10 : Number(text)
            if (!Number.isInteger(limit) || limit < 1 || limit > 1000) {
              return yield* fail(
                "unprocessable",
                `limit must be an integer from 1 to 1000, got ${JSON.stringify(text)}.`
              )
            }
            return yield* getHistory(thread, limit, queryList(urlParams.before)[0])
          }))
        .handleRaw("searchHistory", ({ path }) =>
          Effect.gen(function*() {
            const { user: userId } = yield* CurrentIdentity
            const thread = yield* access.threadRef(userId, path.thread_id)
            const request = yield* Body.json(Threads.HistoryRequest)
            return yield* getHistory(thread, request.limit ?? 10, request.before, request.metadata)
          }))
    }))
