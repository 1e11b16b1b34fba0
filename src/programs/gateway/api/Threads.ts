/**
 * The threads of the LangGraph API, declared: a user's threads, their state (after each checkpoint) and its
 * history, with the request bodies they read and the objects they answer (LangGraph's Thread and ThreadState).
 * Implemented in `handlers/Threads.ts`.
 */
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import * as OpenApi from "@effect/platform/OpenApi"
import * as Schema from "effect/Schema"
import { ThreadPath } from "./Ids.js"
import { QuotaRefusal, refusal } from "./Problem.js"
import { Authentication, NoBody } from "./Security.js"

/** A JSON object of any fields. */
export const JsonRecord = Schema.Record({ key: Schema.String, value: Schema.Unknown })

/**
 * The most bytes of JSON a thread's or a run's `metadata` holds: it is stored, copied into each run of the thread
 * and answered with every thread of a search, so one of megabytes would make a search of a hundred threads larger
 * than the server can build (LangGraph has no bound).
 */
export const MAX_METADATA_BYTES = 64 * 1024

/** `metadata` as it is stored: a JSON object of at most `MAX_METADATA_BYTES`. */
export const StoredMetadata = JsonRecord.pipe(
  Schema.filter((record) => {
    const size = Buffer.byteLength(JSON.stringify(record) ?? "")
    return size <= MAX_METADATA_BYTES ||
      `${size} bytes of JSON, more than the ${MAX_METADATA_BYTES} (64 KiB) metadata may hold`
  })
)

/** A query parameter as sent: once, or repeated. */
export const QueryValue = Schema.Union(Schema.String, Schema.Array(Schema.String))

/**
 * LangGraph's `select`: the names of the fields to answer, each one of `fields` (another is refused, naming
 * them).
 */
export const selectOf = <const Fields extends readonly [string, ...Array<string>]>(...fields: Fields) =>
  Schema.Array(
    Schema.Literal(...fields).annotations({
      message: (issue) => ({
        message: `Expected a field name, one of ${fields.join(", ")}; actual ${JSON.stringify(issue.actual)}`,
        override: true
      })
    })
  ).annotations({ description: "Only these fields of each object" })

/** The fields of a thread a search may select (the SDK's `ThreadSelectField`). */
export const ThreadSelect = selectOf(
  "thread_id",
  "created_at",
  "updated_at",
  "state_updated_at",
  "metadata",
  "config",
  "context",
  "status",
  "values",
  "interrupts"
)

/** The refusals of a request's JSON body (see `Body.ts`). */
export const BodyRefusals = Schema.Union(
  refusal(400, "A body that is not valid JSON, or nested too deep"),
  refusal(413, "A body larger than the gateway reads"),
  refusal(415, "A body that is not JSON sent with Content-Type: application/json"),
  refusal(422, "A body of the wrong shape (the fields named)")
)

/** The refusal of a thread the user does not have (another user's is one they do not have). */
export const ThreadNotFound = refusal(404, "No such thread (of this user)")

// ---------------------------------------------------------------------------------------------------------
// Requests (no identifiers: a body of the wrong type is refused naming the shape it should have)

/** `POST /threads` */
export const ThreadCreate = Schema.Struct({
  thread_id: Schema.optional(Schema.NullOr(Schema.String)),
  metadata: Schema.optional(Schema.NullOr(StoredMetadata)),
  if_exists: Schema.optional(Schema.NullOr(Schema.Literal("raise", "do_nothing")))
})

/** `PATCH /threads/{id}` */
export const ThreadPatch = Schema.Struct({ metadata: Schema.optional(Schema.NullOr(StoredMetadata)) })

/** The filters of a thread search and a count. */
const threadFilters = {
  metadata: Schema.optional(Schema.NullOr(JsonRecord)),
  /** Only the threads whose values have these top-level values (each compared whole). */
  values: Schema.optional(Schema.NullOr(JsonRecord)),
  status: Schema.optional(Schema.NullOr(Schema.String))
}

/** `POST /threads/count` */
export const ThreadCount = Schema.Struct(threadFilters)

/** `POST /threads/search` */
export const ThreadSearch = Schema.Struct({
  ...threadFilters,
  ids: Schema.optional(Schema.NullOr(Schema.Array(Schema.String))),
  limit: Schema.optional(Schema.NullOr(Schema.Number.pipe(Schema.int(), Schema.between(1, 1000)))),
  offset: Schema.optional(Schema.NullOr(Schema.Number.pipe(Schema.int(), Schema.nonNegative()))),
  sort_by: Schema.optional(Schema.NullOr(Schema.Literal("thread_id", "created_at", "updated_at", "status"))),
  sort_order: Schema.optional(Schema.NullOr(Schema.Literal("asc", "desc"))),
  select: Schema.optional(Schema.NullOr(ThreadSelect))
})

/** The most threads one prune names. */
export const MAX_PRUNE_THREADS = 1000

/** `POST /threads/prune` */
export const ThreadPrune = Schema.Struct({
  thread_ids: Schema.Array(Schema.String).pipe(Schema.maxItems(MAX_PRUNE_THREADS)),
  strategy: Schema.optional(Schema.NullOr(Schema.Literal("delete", "keep_latest")))
})

/** The answer to a prune: how many of the user's threads it pruned. */
export const ThreadPruned = Schema.Struct({ pruned_count: Schema.Int }).annotations({ identifier: "ThreadPruned" })

/** `POST /threads/{id}/state` */
export const StateUpdateRequest = Schema.Struct({
  values: Schema.optional(Schema.NullOr(Schema.Unknown)),
  as_node: Schema.optional(Schema.NullOr(Schema.String)),
  /** The checkpoint whose state the update applies to (the head when none). */
  checkpoint_id: Schema.optional(Schema.NullOr(Schema.String)),
  checkpoint: Schema.optional(
    Schema.NullOr(Schema.Struct({ checkpoint_id: Schema.optional(Schema.NullOr(Schema.String)) }))
  )
})

/** `POST /threads/{id}/state/checkpoint` */
export const CheckpointRequest = Schema.Struct({
  checkpoint: Schema.Struct({ checkpoint_id: Schema.optional(Schema.NullOr(Schema.String)) })
})

/** `POST /threads/{id}/history` */
export const HistoryRequest = Schema.Struct({
  limit: Schema.optional(Schema.NullOr(Schema.Number.pipe(Schema.int(), Schema.between(1, 1000)))),
  before: Schema.optional(Schema.NullOr(Schema.Unknown)),
  /** Only the checkpoints whose metadata has these values (`source`, `step`, `run_id`). */
  metadata: Schema.optional(Schema.NullOr(JsonRecord))
})

// ---------------------------------------------------------------------------------------------------------
// Answers

/** DeerFlow's answer to `DELETE /api/threads/{id}` (its `ThreadDeleteResponse`); LangGraph's routes answer 204. */
export const ThreadDeleted = Schema.Struct({ success: Schema.Boolean, message: Schema.String }).annotations({
  identifier: "ThreadDeleteResponse",
  description: "DELETE /api/threads/{thread_id} (DeerFlow's route): success and what was deleted. The LangGraph " +
    "routes (/threads/{thread_id}, /api/langgraph/threads/{thread_id}) answer 204 with no body."
})

/** LangGraph's Thread object. */
export const ThreadObject = Schema.Struct({
  thread_id: Schema.String,
  created_at: Schema.String,
  updated_at: Schema.String,
  metadata: JsonRecord,
  status: Schema.Literal("idle", "busy", "interrupted", "error"),
  values: JsonRecord,
  interrupts: JsonRecord
}).annotations({ identifier: "Thread" })

/** Threads found (with `select`, only the fields selected). */
export const ThreadList = Schema.Array(Schema.partial(ThreadObject))

/** LangGraph's checkpoint reference. */
export const Checkpoint = Schema.Struct({
  thread_id: Schema.String,
  checkpoint_ns: Schema.String,
  checkpoint_id: Schema.NullOr(Schema.String),
  checkpoint_map: Schema.optional(Schema.Null)
}).annotations({ identifier: "Checkpoint" })

/** LangGraph's ThreadState object: the thread's values after a checkpoint. */
export const StateObject = Schema.Struct({
  values: JsonRecord,
  next: Schema.Array(Schema.String),
  tasks: Schema.Array(Schema.Unknown),
  checkpoint: Checkpoint,
  parent_checkpoint: Schema.NullOr(Checkpoint),
  /** The checkpoint's id and its parent's, as DeerFlow's states and history entries give them. */
  checkpoint_id: Schema.NullOr(Schema.String),
  parent_checkpoint_id: Schema.NullOr(Schema.String),
  metadata: Schema.Struct({
    source: Schema.String,
    step: Schema.Number,
    run_id: Schema.optional(Schema.String)
  }),
  created_at: Schema.NullOr(Schema.String),
  interrupts: Schema.Array(Schema.Unknown)
}).annotations({ identifier: "ThreadState" })

/** A thread's states, newest first. */
export const StateHistory = Schema.Array(StateObject)

/**
 * The answer to a state update under LangGraph's routes: the checkpoint it made. DeerFlow's route
 * (`/api/threads/{id}/state`) answers the thread's state after it (`StateObject`), as DeerFlow's does.
 */
export const StateUpdated = Schema.Struct({ checkpoint: Checkpoint }).annotations({ identifier: "ThreadStateUpdated" })

// ---------------------------------------------------------------------------------------------------------
// Endpoints

const CheckpointPath = Schema.Struct({ ...ThreadPath.fields, checkpoint_id: Schema.String })

/** The threads group. */
export const group = HttpApiGroup.make("threads")
  .add(
    HttpApiEndpoint.post("createThread", "/threads")
      .setPayload(ThreadCreate)
      .addSuccess(ThreadObject)
      .addError(BodyRefusals)
      .addError(refusal(409, "The user has a thread of that id already (if_exists: raise)"))
      .addError(QuotaRefusal)
      .annotate(OpenApi.Summary, "Create a thread")
  )
  .add(
    HttpApiEndpoint.post("searchThreads", "/threads/search")
      .setPayload(ThreadSearch)
      .addSuccess(ThreadList)
      .addError(BodyRefusals)
      .annotate(OpenApi.Summary, "Search the user's threads")
  )
  .add(
    HttpApiEndpoint.post("countThreads", "/threads/count")
      .setPayload(ThreadCount)
      .addSuccess(Schema.Int.annotations({ description: "How many of the user's threads match" }))
      .addError(BodyRefusals)
      .annotate(OpenApi.Summary, "Count the user's threads")
  )
  .add(
    HttpApiEndpoint.post("pruneThreads", "/threads/prune")
      .setPayload(ThreadPrune)
      .addSuccess(ThreadPruned)
      .addError(BodyRefusals)
      .addError(refusal(422, "The keep_latest strategy (the store keeps every checkpoint a thread's state is made of)"))
      .annotate(
        OpenApi.Summary,
        "Delete the user's threads of these ids (with their runs and files); ids of no thread of theirs are not pruned"
      )
  )
  .add(
    HttpApiEndpoint.get("getThread", "/threads/:thread_id")
      .setPath(ThreadPath)
      .addSuccess(ThreadObject)
      .addError(ThreadNotFound)
      .annotate(OpenApi.Summary, "Get a thread")
  )
  .add(
    HttpApiEndpoint.patch("patchThread", "/threads/:thread_id")
      .setPath(ThreadPath)
      .setPayload(ThreadPatch)
      .addSuccess(ThreadObject)
      .addError(ThreadNotFound)
      .addError(BodyRefusals)
      .annotate(OpenApi.Summary, "Update a thread's metadata")
  )
  .add(
    HttpApiEndpoint.del("deleteThread", "/threads/:thread_id")
      .setPath(ThreadPath)
      .addSuccess(HttpApiSchema.NoContent)
      .addSuccess(ThreadDeleted)
      .addError(ThreadNotFound)
      .addError(refusal(409, "A run of another gateway process holds the thread"))
      .middleware(NoBody)
      .annotate(OpenApi.Summary, "Delete a thread, its runs and its files (its active run is cancelled)")
  )
  .add(
    HttpApiEndpoint.post("copyThread", "/threads/:thread_id/copy")
      .setPath(ThreadPath)
      .addSuccess(ThreadObject)
      .addError(ThreadNotFound)
      .addError(QuotaRefusal)
      .middleware(NoBody)
      .annotate(OpenApi.Summary, "Copy a thread: a new thread of the user's with its checkpoints and files")
  )
  .add(
    HttpApiEndpoint.get("getState", "/threads/:thread_id/state")
      .setPath(ThreadPath)
      .addSuccess(StateObject)
      .addError(ThreadNotFound)
      .annotate(OpenApi.Summary, "Get a thread's state")
  )
  .add(
    HttpApiEndpoint.post("updateState", "/threads/:thread_id/state")
      .setPath(ThreadPath)
      .setPayload(StateUpdateRequest)
      .addSuccess(StateUpdated)
      .addSuccess(StateObject)
      .addError(ThreadNotFound)
      .addError(BodyRefusals)
      .addError(refusal(409, "A run holds the thread"))
      .annotate(OpenApi.Summary, "Update a thread's state (server-owned fields refused)")
  )
  .add(
    HttpApiEndpoint.post("getStateAtCheckpoint", "/threads/:thread_id/state/checkpoint")
      .setPath(ThreadPath)
      .setPayload(CheckpointRequest)
      .addSuccess(StateObject)
      .addError(refusal(404, "No such thread (of this user), or no such checkpoint"))
      .addError(BodyRefusals)
      .annotate(OpenApi.Summary, "Get a thread's state after a checkpoint")
  )
  .add(
    HttpApiEndpoint.get("getStateAt", "/threads/:thread_id/state/:checkpoint_id")
      .setPath(CheckpointPath)
      .addSuccess(StateObject)
      .addError(refusal(404, "No such thread (of this user), or no such checkpoint"))
      .annotate(OpenApi.Summary, "Get a thread's state after a checkpoint")
  )
  .add(
    HttpApiEndpoint.get("getHistory", "/threads/:thread_id/history")
      .setPath(ThreadPath)
      .setUrlParams(Schema.Struct({
        limit: Schema.optional(QueryValue.annotations({ description: "How many states (1-1000, default 10)" })),
        before: Schema.optional(QueryValue.annotations({ description: "Only the states before this checkpoint id" }))
      }))
      .addSuccess(StateHistory)
      .addError(ThreadNotFound)
      .addError(refusal(422, "A limit that is not an integer from 1 to 1000"))
      .annotate(OpenApi.Summary, "A thread's states, newest first")
  )
  .add(
    HttpApiEndpoint.post("searchHistory", "/threads/:thread_id/history")
      .setPath(ThreadPath)
      .setPayload(HistoryRequest)
      .addSuccess(StateHistory)
      .addError(ThreadNotFound)
      .addError(BodyRefusals)
      .annotate(OpenApi.Summary, "A thread's states, newest first (before a checkpoint)")
  )
  .middlewareEndpoints(Authentication)
  .annotate(OpenApi.Description, "A user's threads and their state")
