/**
 * Thread ids of gateway users. A client names its threads (LangGraph's `thread_id`, usually a uuid it made);
 * the thread store keys threads by one id for all users. So that an id one user has is, for every other user,
 * exactly an id nobody has (no 409 telling them it is taken, no way to take it before its owner does, and
 * no access to the other's thread), a user's thread is stored under an id of that user's own: the client's id
 * followed by `.u` and 12 hex digits of a digest of the user id (`0f3c...e1.u5d41402abc4b`). Clients only ever
 * see their own ids: the gateway maps them both ways (`find`, `create`, `publicIdOf`).
 *
 * Why derived ids rather than a store scoped by owner (threads keyed by owner and id): every store (SQLite,
 * PostgreSQL, in memory), their run and lease tables, the CLI and the sandbox's per-thread directories key a
 * thread by one id; a derived id changes none of them (no migration, no change to the store port or its
 * conformance tests), and the mapping lives in this one module of the gateway.
 *
 * Two exceptions keep what was there working: the CLI's user (`default`, the user of an open gateway) keeps
 * the client's id as is, as the CLI names threads, so the CLI and an open gateway's web page share them (it
 * gets a derived id only when another user holds the plain one); and a thread stored under the client's id
 * before ids were derived is still its owner's under that id.
 */
import * as Crypto from "node:crypto"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type { StoreError } from "../../services/RunContext.js"
import { isSafeId } from "../../services/Sandbox.js"
import type { Metadata, ThreadStore, ThreadSummary } from "../../services/ThreadStore.js"
import { DEFAULT_USER } from "./Auth.js"
import type * as Quotas from "./Quotas.js"

/** The longest id a client may give a new thread: a stored id (at most 128 characters) adds 14 to it. */
export const MAX_NEW_ID_LENGTH = 114

/** The end of a derived id; clients may not end a new thread's id so. */
const DERIVED = /\.u[0-9a-f]{12}$/

/** What a user's derived ids end with: `.u` and 12 hex digits of the user id's digest. */
export const tagOf = (userId: string): string =>
  `.u${Crypto.createHash("sha256").update(`antler thread owner\u0000${userId}`).digest("hex").slice(0, 12)}`

/** The ids a user's thread `publicId` may be stored under, in the order they are looked up and taken. */
export const storedIds = (userId: string, publicId: string): ReadonlyArray<string> => {
  const derived = `${publicId}${tagOf(userId)}`
  const ids = userId === DEFAULT_USER ? [publicId, derived] : [derived, publicId]
  return ids.filter(isSafeId)
}

/** The id a user's client knows a stored thread by. */
export const publicIdOf = (userId: string, storedId: string): string => {
  const tag = tagOf(userId)
  return storedId.endsWith(tag) && storedId.length > tag.length ? storedId.slice(0, -tag.length) : storedId
}

/** Why a client's id cannot name a new thread, if it cannot. */
export const newIdProblem = (publicId: string): string | undefined => {
  if (!isSafeId(publicId) || publicId.length > MAX_NEW_ID_LENGTH) {
    return `ids are 1-${MAX_NEW_ID_LENGTH} letters, digits, '.', '_' or '-', starting with a letter or digit`
  }
  if (DERIVED.test(publicId)) return "ids ending in '.u' and 12 hex digits are the server's own"
  return undefined
}

const ownedBy = (userId: string, summary: ThreadSummary) => (summary.owner ?? DEFAULT_USER) === userId

/** The user's thread the client calls `publicId` (its `thread_id` is the stored id), if the user has one. */
export const find = (
  store: ThreadStore["Type"],
  userId: string,
  publicId: string
): Effect.Effect<Option.Option<ThreadSummary>, StoreError> =>
  Effect.gen(function*() {
    for (const id of storedIds(userId, publicId)) {
      const info = yield* store.info(id)
      if (Option.isSome(info) && ownedBy(userId, info.value)) return info
    }
    return Option.none<ThreadSummary>()
  })

/**
 * A run's thread, as the scheduler starts one: the user's thread `publicId`, or, with `metadata` (a run on a thread
 * of its own), that thread made the first time (a run started again finds it), within the user's thread quota.
 * Fails saying which is missing, or which quota refused it.
 */
export const forRun = (
  store: ThreadStore["Type"],
  quotas: Quotas.Service,
  userId: string,
  publicId: string,
  metadata?: Metadata
): Effect.Effect<ThreadSummary, { readonly message: string }> =>
  Effect.gen(function*() {
    const found = yield* find(store, userId, publicId)
    const thread = metadata !== undefined && Option.isNone(found)
      ? yield* quotas.thread(userId, create(store, userId, publicId, metadata))
      : found
    if (Option.isSome(thread)) return thread.value
    return yield* Effect.fail({
      message: metadata !== undefined ? "Cannot create the run's thread" : `Thread ${publicId} not found`
    })
  })

/**
 * Makes the user's thread `publicId` (check first with `find` that the user has none): stored under the first
 * of its ids that no thread has. None when every one is taken (by other users: for the user, an id taken by
 * another is one nobody has, so this needs a digest collision or threads made before ids were derived).
 */
export const create = (
  store: ThreadStore["Type"],
  userId: string,
  publicId: string,
  metadata: Metadata
): Effect.Effect<Option.Option<ThreadSummary>, StoreError> =>
  Effect.gen(function*() {
    for (const id of storedIds(userId, publicId)) {
      if (Option.isSome(yield* store.info(id))) continue
      yield* store.ensure(id, { owner: userId, metadata })
      // another request may have made it in between: it is this user's only if its owner says so
      const made = yield* store.info(id)
      if (Option.isSome(made) && ownedBy(userId, made.value)) return made
    }
    return Option.none<ThreadSummary>()
  })
