/**
 * The rows the SQL thread stores share (threads, runs, run events, leases): their Schemas, a listed thread's summary, a
 * metadata patch, and how a failure of the database reads (`StoreError`, naming what could not be done).
 */
import type { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import type * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import { StoreError } from "../../services/RunContext.js"
import { RecordStopReason, RunStatus } from "../../services/RunEvents.js"
import type { Metadata, ThreadSummary } from "../../services/ThreadStore.js"
import { METADATA_BOUND, threadStatus } from "../../services/ThreadStore.js"
import type * as Redact from "../../state/Redact.js"
import { formatParseError } from "./Codec.js"

/** A JSON object stored as text (thread and run metadata); `NULL` is none. */
export const MetadataText = Schema.NullOr(
  Schema.parseJson(Schema.Record({ key: Schema.String, value: Schema.Unknown }))
)

/** A thread row (also the Postgres store's). */
export const ThreadRow = Schema.Struct({
  thread_id: Schema.String,
  title: Schema.NullOr(Schema.String),
  created_at: Schema.String,
  updated_at: Schema.String,
  checkpoints: Schema.Union(Schema.Number, Schema.NumberFromString),
  owner: Schema.NullOr(Schema.String),
  metadata: MetadataText,
  /** The thread's last run, and the holder of its lease (for its status). */
  run_id: Schema.NullOr(Schema.String),
  status: Schema.NullOr(Schema.Union(RunStatus, Schema.Literal("pending", "running"))),
  stop_reason: Schema.NullOr(RecordStopReason),
  lease_run_id: Schema.NullOr(Schema.String),
  lease_owner: Schema.NullOr(Schema.String),
  lease_expires_at: Schema.NullOr(Schema.Union(Schema.Number, Schema.NumberFromString))
})

/** A run row (also the Postgres store's). */
export const RunRow = Schema.Struct({
  run_id: Schema.String,
  thread_id: Schema.String,
  status: Schema.Union(RunStatus, Schema.Literal("pending", "running")),
  stop_reason: Schema.NullOr(RecordStopReason),
  started_at: Schema.String,
  ended_at: Schema.NullOr(Schema.String),
  error: Schema.NullOr(Schema.String),
  metadata: MetadataText
})

/** A run's recorded events, stored as one JSON text per run (`ThreadStore.saveRunEvents`). */
export const RunEventsRow = Schema.Struct({
  events: Schema.parseJson(Schema.Array(Schema.Struct({
    seq: Schema.Number,
    event_type: Schema.String,
    category: Schema.String,
    content: Schema.Unknown,
    metadata: Schema.Record({ key: Schema.String, value: Schema.Unknown }),
    created_at: Schema.String
  })))
})

/** A run's events as stored: JSON text, with `redactor`'s secrets replaced. */
export const runEventsText = (events: ReadonlyArray<unknown>, redactor: Redact.Redactor): string => {
  const text = JSON.stringify(events)
  return redactor.test(text) ? JSON.stringify(redactor.value(events)) : text
}

/** Run event rows (`RunEventsRow`), decoded. */
export const decodeRunEventsRows = Schema.decodeUnknownEither(Schema.Array(RunEventsRow))
/** Thread rows (`ThreadRow`), decoded. */
export const decodeThreadRows = Schema.decodeUnknownEither(Schema.Array(ThreadRow))
/** Run rows (`RunRow`), decoded. */
export const decodeRunRows = Schema.decodeUnknownEither(Schema.Array(RunRow))
/** A metadata column (`MetadataText`), decoded. */
export const decodeMetadata = Schema.decodeUnknownEither(MetadataText)

/**
 * `patch` applied to `current` (see `mergeMetadata`), or, when the result is more than `maxBytes` of JSON (none: no
 * bound), the `StoreError` of `ThreadStore.patchMetadata` saying how many bytes it would be.
 */
export const mergeBounded = (
  current: Metadata,
  patch: Metadata,
  maxBytes: number | undefined
): Either.Either<Metadata, StoreError> => {
  const next = mergeMetadata(current, patch)
  if (maxBytes === undefined) return Either.right(next)
  const bytes = Buffer.byteLength(JSON.stringify(next))
  return bytes <= maxBytes ? Either.right(next) : Either.left(
    new StoreError({
      operation: METADATA_BOUND,
      message: `the thread's metadata would be ${bytes} bytes of JSON, more than ${maxBytes}`
    })
  )
}

/** A metadata patch applied: keys set, `null` values removed. */
export const mergeMetadata = (current: Metadata, patch: Metadata): Metadata => {
  const out: Record<string, unknown> = { ...current }
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) delete out[key]
    else out[key] = value
  }
  return out
}

/** A thread row as listed, its status read at `now` from its last run and the holder of its lease. */
export const threadSummary = (row: typeof ThreadRow.Type, now: number): ThreadSummary => {
  const holder = row.lease_run_id === null || row.lease_owner === null || row.lease_expires_at === null
    ? undefined
    : { run_id: row.lease_run_id, owner: row.lease_owner, expires_at: row.lease_expires_at }
  const last = row.run_id === null || row.status === null ? undefined : { run_id: row.run_id, status: row.status }
  const status = threadStatus(last, holder, now)
  return {
    thread_id: row.thread_id,
    title: row.title,
    created_at: row.created_at,
    updated_at: row.updated_at,
    checkpoints: row.checkpoints,
    owner: row.owner,
    metadata: row.metadata ?? {},
    ...(status === undefined ? {} : { status, stop_reason: row.stop_reason })
  }
}

/** Rows decoded with `decode`; rows that do not decode are a `StoreError` saying what was unreadable. */
export const decodeRows = <A>(
  decode: (rows: unknown) => Either.Either<A, ParseResult.ParseError>,
  rows: unknown,
  operation: string,
  what: string
): Effect.Effect<A, StoreError> =>
  Either.match(decode(rows), {
    onLeft: (error) =>
      Effect.fail(new StoreError({ operation, message: `${what} has an unreadable row: ${formatParseError(error)}` })),
    onRight: Effect.succeed
  })

// (PostgreSQL's `bigint` comes as a string)
const Bytes = Schema.Union(Schema.Number, Schema.NumberFromString)

/** The rows of a thread's byte counters (`ThreadStore.bytesOf`). */
export const decodeBytesRows = Schema.decodeUnknownEither(
  Schema.Array(Schema.Struct({ bytes: Bytes, owner: Schema.NullOr(Schema.String), owned: Bytes }))
)

const CountRows = Schema.Tuple(Schema.Struct({ n: Schema.Union(Schema.NonNegativeInt, Schema.NumberFromString) }))

/** The count of a `SELECT COUNT(*) AS n` (PostgreSQL's `bigint` comes as a string), or a `StoreError`. */
export const countOf = (rows: unknown, operation: string): Effect.Effect<number, StoreError> =>
  Effect.map(decodeRows(Schema.decodeUnknownEither(CountRows), rows, operation, "A count"), ([row]) => row.n)

/** What a SQL failure says: the driver's message when it has one, else the SQL layer's. */
export const driverMessage = (error: SqlError): string => {
  const cause: unknown = error.cause
  const detail = cause instanceof Error ? cause.message : undefined
  return detail !== undefined && detail !== "" ? detail : error.message
}

/** A store operation's failure: `what: <the database's message>`, the SQL error as the cause. */
export const toStoreError = (operation: string, what: string) => (error: SqlError | StoreError): StoreError =>
  error._tag === "StoreError"
    ? error
    : new StoreError({ operation, message: `${what}: ${driverMessage(error)}`, cause: error })

/** A time as the stores write it (ISO 8601, UTC). */
export const iso = (millis: number) => new Date(millis).toISOString()
