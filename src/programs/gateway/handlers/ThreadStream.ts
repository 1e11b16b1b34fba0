/**
 * The thread stream endpoint (declared in `api/ThreadStream.ts`): the user's thread's runs' events, one run after
 * the other as this process runs them or, in a cluster, as their thread's runner does (`ThreadStream`,
 * `FrameMirror`); another user's thread is a 404, as a run's join.
 */
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import { Readable } from "node:stream"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import { AppConfigService } from "../../../services/AppConfig.js"
import type { LangGraphApi } from "../api/GatewayApi.js"
import { describeParseError, fail, problem } from "../api/Problem.js"
import { CurrentIdentity } from "../api/Security.js"
import * as FrameMirror from "../FrameMirror.js"
import * as ThreadStream from "../ThreadStream.js"
import * as Access from "./Access.js"
import { queryList, sse } from "./Http.js"

const decodeModes = Schema.decodeUnknownEither(Schema.Array(Schema.Literal(...ThreadStream.MODES)))

/** How many thread streams one user may hold open at a time (each waits for its thread's next run while idle). */
export const MAX_OPEN_PER_USER = 32

/** The thread streams each user holds open, under every prefix of the gateway (one count per gateway). */
export interface OpenStreams {
  /** Takes one of the user's streams; false when the user holds `MAX_OPEN_PER_USER` already. */
  readonly take: (user: string) => boolean
  readonly release: (user: string) => void
}

/** No streams open yet. */
export const openStreams = (): OpenStreams => {
  const open = new Map<string, number>()
  return {
    take: (user) => {
      const held = open.get(user) ?? 0
      if (held >= MAX_OPEN_PER_USER) return false
      open.set(user, held + 1)
      return true
    },
    release: (user) => {
      const held = (open.get(user) ?? 1) - 1
      if (held <= 0) open.delete(user)
      else open.set(user, held)
    }
  }
}

/** The thread stream endpoint of `api` (the LangGraph API under one of its prefixes); `open` counts the streams. */
export const layer = (api: LangGraphApi, open: OpenStreams) =>
  HttpApiBuilder.group(api, "threadStream", (handlers) =>
    Effect.gen(function*() {
      const { store, runs, storeFailed, ownedThread } = yield* Access.make
      const heartbeatSeconds = (yield* AppConfigService).config.gateway.heartbeat_seconds
      return handlers.handleRaw("joinThreadStream", ({ headers, path, request, urlParams }) =>
        Effect.gen(function*() {
          const { user } = yield* CurrentIdentity
          const stored = (yield* ownedThread(user, path.thread_id)).thread_id
          const lastEventId = headers["last-event-id"]
          const cursor = ThreadStream.parseCursor(lastEventId)
          if (cursor === undefined) {
            return yield* fail(
              "bad_request",
              `Last-Event-ID must be an event id of this thread's stream, got ${JSON.stringify(lastEventId)}.`
            )
          }
          const requested = [...queryList(urlParams.stream_mode), ...queryList(urlParams.stream_modes)]
          const decoded = decodeModes(requested)
          if (decoded._tag === "Left") {
            return yield* fail("unprocessable", `stream_mode: ${describeParseError(decoded.left)}`)
          }
          const modes = decoded.right.length === 0 ? ["run_modes" as const] : decoded.right
          // (a run of another thread is none of this stream's, whatever a cursor names)
          const ofThread = <A extends { readonly threadId: string }>(run: A | undefined) =>
            run?.threadId === stored ? run : undefined
          const records = Effect.orElseSucceed(
            Effect.mapError(store.runs({ threadId: stored }), storeFailed),
            () => []
          )
          const mirrors = FrameMirror.mirrors()
          const source: ThreadStream.Source = {
            active: () => ofThread(runs.activeOf(stored)),
            get: (runId, from) => {
              const own = ofThread(runs.get(runId))
              if (own !== undefined || runs.mirror === undefined) return Effect.succeed(own)
              // in a cluster, a run its thread's runner keeps: its frames from there, as long as they are followed
              const mirror = runs.mirror
              return Effect.flatMap(
                Effect.orElseSucceed(runs.lookup(stored, runId), () => undefined),
                (run) => {
                  const ours = ofThread(run)
                  return ours === undefined ? Effect.succeed(undefined) : mirrors.follow(runId, mirror(ours, from))
                }
              )
            },
            records,
            onStart: (listener) => runs.onStart(stored, listener),
            ...(runs.onNotice === undefined ? {} : { onNotice: (listener) => runs.onNotice!(stored, listener) }),
            // (in a cluster another runner may start the thread's runs)
            elsewhere: runs.mirror !== undefined
          }
          if (!open.take(user)) {
            return problem(
              429,
              `At most ${MAX_OPEN_PER_USER} thread streams may be open at a time for one user; close one first.`,
              { "retry-after": "5" }
            )
          }
          const text = ThreadStream.stream(source, cursor, modes, heartbeatSeconds).pipe(Stream.ensuring(mirrors.close))
          // destroying the readable (the client gone) ends the iteration, which interrupts the stream
          const body = Readable.from(Stream.toAsyncIterable(text), { objectMode: false })
          // (the stream's share given back once its response is over, however it ended)
          body.once("close", () => open.release(user))
          // (where the SDK reconnects to, with the last event's id, when the connection breaks: the path under its
          // apiUrl, without the prefix the request came by)
          return sse(body, { location: `/threads/${path.thread_id}/stream` })
        }))
    }))
