/**
 * What the tests of a write fenced by a lease share (a gateway's write held at a gate just before its store call,
 * while the test takes the thread as another run and writes that run's step): the gateway of one store kind over a
 * wrapped store, and the other run that takes the thread.
 */
import { afterAll, assert, beforeAll } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as MemoryThreadStore from "../../src/layers/MemoryThreadStore.js"
import * as Run from "../../src/programs/Run.js"
import type { ThreadStore } from "../../src/services/ThreadStore.js"
import * as M from "../../src/state/Message.js"
import type { StartOptions, TestGateway } from "../programs/gateway/support.js"
import * as Support from "../programs/gateway/support.js"
import * as Postgres from "./postgres.js"
import { as } from "./requests.js"

/** The stores a fenced write is tried on. */
export const KINDS = ["sqlite", "memory", "postgres"] as const

/** The run that takes the thread while the writer stalls, and its step. */
export const OTHER = "run-that-took-it"
export const NEW_ANSWER = "The new owner's answer."

/**
 * The gateway of one store kind (in the current `describe`): its store is `wrap` over the memory store for `memory`,
 * else over the configured SQLite or PostgreSQL one (`store()`: the store under the wrap). When it stops, `release`
 * lets go what the wrap still holds. `skip`: PostgreSQL is wanted and there is none.
 */
export const gatewayOf = (
  kind: typeof KINDS[number],
  pg: Postgres.Postgres | { readonly skip: string },
  options: {
    readonly script: StartOptions["script"]
    readonly wrap: (base: ThreadStore["Type"]) => ThreadStore["Type"]
    readonly release: () => void
    readonly config?: Record<string, unknown>
  }
) => {
  const skip = kind === "postgres" && "skip" in pg
  let inner: ThreadStore["Type"] | undefined
  let gateway: TestGateway
  beforeAll(async () => {
    if (skip) return
    const database = kind === "postgres" ? { database: { url: await (pg as Postgres.Postgres).createDatabase() } } : {}
    gateway = await Support.start({
      script: options.script,
      wrapStore: (configured) => {
        const base = kind === "memory" ? MemoryThreadStore.make() : configured
        inner = base
        return options.wrap(base)
      },
      config: { ...database, ...options.config }
    })
  })
  afterAll(() => {
    options.release()
    return gateway?.stop()
  })
  return { skip, store: () => inner!, gateway: () => gateway, api: as(() => gateway) }
}

/**
 * Another run takes `threadId` (the held writer's lease lapsed: that run's clock, `now`, is past it) and writes its
 * step (`NEW_ANSWER`) under its lease.
 */
export const takeThread = async (store: ThreadStore["Type"], threadId: string, now: number, message?: string) => {
  const took = await Effect.runPromise(
    store.acquireLease({ threadId, runId: OTHER, ttlMs: Run.LEASE_TTL_MS * 10, now })
  )
  assert.isUndefined(took, message)
  await Effect.runPromise(store.append(threadId, OTHER, [{ messages: [M.ai(NEW_ANSWER)] }], { leased: true }))
}
