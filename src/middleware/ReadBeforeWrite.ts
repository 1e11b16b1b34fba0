/**
 * ReadBeforeWrite (SPEC §5.11, lead chain slot 12; `read_before_write.enabled`, default on): changing a file
 * that exists requires having read its current version. It stops blind appends and edits made from a stale
 * picture of a file (the same section appended five times).
 *
 * - A successful `read_file` gets `additional_kwargs.deerflow_read_mark = { path, hash }`: the file's virtual
 *   path and the sha256 of its whole content (a ranged read hashes the whole file too). The sandbox's read_file
 *   stamps it from the bytes it read (`state/ReadMark.ts`); a read result without one (another tool named
 *   read_file) is marked here from the file read through the run's sandbox. The mark lives on the message in
 *   the thread, so a summary that drops the read drops the mark with it.
 * - `write_file` / `str_replace` on a file that exists run only when the latest read mark for that path in the
 *   thread has the hash of the file as it is now; otherwise the call does not run and the model gets an error
 *   result saying to read the file again first. Writes never refresh marks, so two edits in a row need a read
 *   in between. A missing file may be created; when the file cannot be inspected the write goes ahead (fail
 *   open) and the tool reports its own error.
 * - Paths are the sandbox's virtual paths (a relative path is taken from the workspace, as the file tools do),
 *   and files are read through the run's sandbox, as the tools read them.
 * - The check and the call (and a read and its mark) hold a lock per (thread, path), kept by the agent: the
 *   calls of one response run concurrently, and two writes must not both pass on one stale mark. A read by a
 *   tool that stamps its own marks (`marksReads`, the sandbox's read_file) takes no lock: its mark is of the
 *   bytes the model sees, so a write running beside it can only make that mark stale, which blocks the next
 *   write until a new read, never lets one through.
 */
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import { RunContext, RunState } from "../services/RunContext.js"
import * as Mutex from "../internal/Mutex.js"
import type { SandboxError } from "../services/Sandbox.js"
import { absoluteVirtual, SandboxProvider } from "../services/Sandbox.js"
import type { ToolResult } from "../services/ToolService.js"
import { ToolService } from "../services/ToolService.js"
import type { Message, ToolCall } from "../state/Message.js"
import * as M from "../state/Message.js"
import * as Marks from "../state/ReadMark.js"
import * as Middleware from "./Middleware.js"
import type { ToolMeta } from "./ToolErrorHandling.js"
import { TOOL_META_KEY } from "./ToolErrorHandling.js"
import * as Chain from "./Chain.js"

/** The `additional_kwargs` key of a read mark. */
export const READ_MARK_KEY = Marks.READ_MARK_KEY

/** Tools whose successful results are marked. */
export const READ_TOOLS: ReadonlySet<string> = new Set(["read_file"])
/** Tools that change an existing file only after a read of its current version. */
export const GATED_WRITE_TOOLS: ReadonlySet<string> = new Set(["write_file", "str_replace"])

/** A read mark: which file was read, and the hash of its whole content then. */
export type ReadMark = Marks.ReadMark

/** The sha256 of a file's text (UTF-8), hex. */
export const contentHash = Marks.contentHash

/** The `path` argument of a call, when it is a non-empty string. */
export const requestedPath = (call: ToolCall): string | undefined => {
  const path = call.args.path
  return typeof path === "string" && path !== "" ? path : undefined
}

/** The path a mark records for a path argument: absolute (relative ones from the workspace) and normalised. */
export const markPath = (path: string): string => absoluteVirtual(path)

/** The hash of the latest read mark for `path` in the messages (newest first), if any. */
export const latestMarkHash = (messages: ReadonlyArray<Message>, path: string): string | undefined => {
  for (let i = messages.length - 1; i >= 0; i--) {
    const message = messages[i]!
    if (message.type !== "tool") continue
    const mark = message.additional_kwargs?.[READ_MARK_KEY]
    if (typeof mark !== "object" || mark === null || (mark as { path?: unknown }).path !== path) continue
    const hash = (mark as { hash?: unknown }).hash
    return typeof hash === "string" ? hash : undefined
  }
  return undefined
}

/** What the model reads when a write is blocked: DeerFlow's `_BLOCK_MESSAGE`, word for word. */
export const blockedText = (tool: string, path: string): string =>
  `Error: ${tool} blocked — ${path} already exists and you have not read its current version. ` +
  "Any write invalidates earlier reads, so re-read before every modification. " +
  "Call read_file on it (a ranged read of the relevant section is enough, e.g. the last ~30 lines " +
  "before an append), check what is already there, then retry."

// The metadata is set here: ToolErrorHandling stands inside this middleware, so it never sees this result. It is
// what DeerFlow's classification gives its own text (no keyword matches: `unknown`), whatever the path says (a
// path like `404.md` does not make it a not-found error, as it could in DeerFlow's).
const BLOCKED_META: ToolMeta = {
  status: "error",
  error_type: "unknown",
  recoverable_by_model: true,
  recommended_next_action: "try_alternative",
  source: "tool_return"
}

/** The error result of a blocked write. */
export const blockedResult = (call: ToolCall, path: string): ToolResult => ({
  message: M.tool(blockedText(call.name, path), call.id, {
    name: call.name,
    status: "error",
    additional_kwargs: { [TOOL_META_KEY]: BLOCKED_META }
  })
})

/** The result with a read mark on its message. */
export const withMark = (result: ToolResult, mark: ReadMark): ToolResult => ({
  ...result,
  message: Marks.withMark(result.message, mark)
})

/** Locks by key, for the runs of one agent; a key's entry exists only while a fiber holds or waits for it. */
export interface Locks {
  readonly withLock: <A, E, R>(key: string, effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
}

/** A fresh set of locks (each read_file call takes one: a free lock costs a few effect steps, see `Mutex`). */
export const makeLocks = (): Locks => {
  const held = new Map<string, { readonly lock: Mutex.Mutex; users: number }>()
  return {
    withLock: (key, effect) =>
      Effect.uninterruptibleMask((restore) =>
        Effect.suspend(() => {
          let entry = held.get(key)
          if (entry === undefined) {
            entry = { lock: Mutex.make(), users: 0 }
            held.set(key, entry)
          }
          entry.users++
          const taken = entry
          return Effect.ensuring(
            restore(taken.lock.locked(effect)),
            Effect.sync(() => {
              if (--taken.users === 0) held.delete(key)
            })
          )
        })
      )
  }
}

/** What reading a file's current content gave. */
type Inspection =
  | { readonly _tag: "content"; readonly content: string }
  | { readonly _tag: "missing" }
  | { readonly _tag: "unreadable"; readonly why: string }

/**
 * ReadBeforeWrite. Needs the app's `SandboxProvider` (files are read through the run's sandbox) and, per run,
 * `RunContext` and `RunState`. The locks belong to the agent (one set per built layer).
 */
export const layer = (): Middleware.Middleware<SandboxProvider> =>
  Layer.unwrapEffect(Effect.map(ToolService, (inner) => {
    const locks = makeLocks()
    // Tools that stamp their results from the bytes they read: the mark is of what the model sees, whatever
    // a concurrent write does, so their calls need neither the lock nor a second read.
    const selfMarking: ReadonlySet<string> = new Set(
      inner.definitions.filter((d) => d.marksReads === true).map((d) => d.name)
    )
    return Middleware.make(
      Effect.gen(function*() {
        const provider = yield* SandboxProvider
        const context = yield* RunContext
        const state = yield* RunState

        // the run's sandbox: the one already acquired for the thread, else acquired now
        const sandbox = Effect.flatMap(
          provider.current(context.threadId, context.userId),
          (current) =>
            current._tag === "Some" ? Effect.succeed(current.value) : provider.acquire(context.threadId, context.userId)
        )
        const inspect = (path: string): Effect.Effect<Inspection> =>
          sandbox.pipe(
            Effect.flatMap((sandbox) => sandbox.readText(path)),
            Effect.either,
            Effect.map((read): Inspection =>
              Either.isRight(read)
                // Sandboxes that report failures in-band ("Error: ...") cannot be told apart from content.
                ? read.right.startsWith("Error:")
                  ? { _tag: "unreadable", why: "the sandbox answered with an error text" }
                  : { _tag: "content", content: read.right }
                : notRead(read.left)
            ),
            Effect.catchAllCause((cause) =>
              Cause.isInterruptedOnly(cause)
                ? Effect.failCause(cause as Cause.Cause<never>)
                : Effect.succeed<Inspection>({ _tag: "unreadable", why: Cause.pretty(cause) })
            )
          )

        const lockKey = (path: string) => `${context.threadId}\u0000${path}`

        const gate = (call: ToolCall, requested: string, next: Middleware.ToolNext) => {
          const path = markPath(requested)
          return locks.withLock(
            lockKey(path),
            Effect.gen(function*() {
              const found = yield* inspect(requested)
              if (found._tag === "missing") return yield* next(call)
              if (found._tag === "unreadable") {
                yield* Effect.logDebug(`read-before-write could not inspect ${path}; the write goes ahead`, found.why)
                return yield* next(call)
              }
              const current = yield* state.get
              if (latestMarkHash(current.messages, path) === contentHash(found.content)) return yield* next(call)
              return blockedResult(call, path)
            })
          )
        }

        const mark = (call: ToolCall, requested: string, next: Middleware.ToolNext) => {
          const path = markPath(requested)
          return locks.withLock(
            lockKey(path),
            Effect.flatMap(next(call), (result) => {
              const message = result.message
              if (message.status === "error" || M.contentText(message.content).startsWith("Error:")) {
                return Effect.succeed(result)
              }
              // stamped by the tool from the bytes it read (under this lock, so no write came between)
              if (Marks.markOf(message)?.path === path) return Effect.succeed(result)
              return Effect.map(inspect(requested), (found) =>
                found._tag === "content" ? withMark(result, { path, hash: contentHash(found.content) }) : result)
            })
          )
        }

        return {
          tool: (call, next) => {
            const requested = requestedPath(call)
            if (requested === undefined) return next(call)
            if (GATED_WRITE_TOOLS.has(call.name)) return gate(call, requested, next)
            if (READ_TOOLS.has(call.name)) return selfMarking.has(call.name) ? next(call) : mark(call, requested, next)
            return next(call)
          }
        } satisfies Middleware.Wrappers
      }),
      { name: "ReadBeforeWrite" }
    )
  }))

const notRead = (error: SandboxError): Inspection =>
  error.reason === "not_found" ? { _tag: "missing" } : { _tag: "unreadable", why: error.message }

/** Its chain entry: inside the sandbox and the guardrail, outside the stagnation guard. */
export const entry = () =>
  Chain.entry("ReadBeforeWrite", () => layer(), [
    { inside: "Sandbox", reason: "a sandbox it acquires to inspect a file is bound and released with the run's" },
    { inside: "Guardrail", reason: "a call the guardrail denies never has its file read" },
    { outside: "ToolProgress", reason: "a write it refuses never ran, so it never counts as the tool stagnating" }
  ])
