/**
 * The crons endpoints (declared in `api/Crons.ts`), over the task store (a cron is a task of kind cron, see
 * `Crons.ts`). Everything a cron's runs would be refused for is refused here, at the boundary, with a 422 naming
 * the field: a schedule that is not five valid cron fields (checked as DeerFlow's scheduled tasks check theirs),
 * an unknown time zone, an end time that is not a time, input that is not messages, settings of an agent or model
 * the user does not have, a payload larger than `Crons.MAX_STORED_BYTES`, run metadata holding `auth_token` (as a
 * run's). The payload is kept without the secrets of its `context` and `config.context` (as a run's `kwargs`). A
 * thread cron's thread is one of its user's; every cron is its user's alone (another user's is "not found").
 */
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as Crypto from "node:crypto"
import type { ModelConfig } from "../../../services/AppConfig.js"
import { AppConfigService } from "../../../services/AppConfig.js"
import * as Factory from "../../Factory.js"
import * as Api from "../api/Crons.js"
import type { LangGraphApi } from "../api/GatewayApi.js"
import { fail, GatewayError, notFound } from "../api/Problem.js"
import { CurrentIdentity } from "../api/Security.js"
import * as Body from "../Body.js"
import * as Crons from "../Crons.js"
import * as InputBounds from "../InputBounds.js"
import { sameJson } from "../JsonEquality.js"
import * as Protocol from "../Protocol.js"
import * as RunSettings from "../RunSettings.js"
import * as Schedules from "../scheduler/Schedules.js"
import type { Task, TaskPatch } from "../scheduler/TaskStore.js"
import { neverRun, TaskStore } from "../scheduler/TaskStore.js"
import * as Access from "./Access.js"
import * as Live from "./Live.js"
import { json, jsonPage } from "./Http.js"

/** The most crons a user has. */
export const MAX_CRONS_PER_USER = 100

const iso = (millis: number | null) => (millis === null ? null : new Date(millis).toISOString())

/** A cron as LangGraph's clients read it. */
export const cronObject = (task: Task, stored: Crons.Stored): typeof Api.CronObject.Type => ({
  cron_id: task.id,
  assistant_id: task.assistant_id,
  thread_id: task.thread_id,
  ...(task.thread_id === null ? { on_run_completed: stored.on_run_completed ?? "delete" } : {}),
  end_time: typeof task.schedule_spec.end_time === "string" ? task.schedule_spec.end_time : null,
  schedule: typeof task.schedule_spec.cron === "string" ? task.schedule_spec.cron : "",
  timezone: task.timezone,
  created_at: task.created_at,
  updated_at: task.updated_at,
  payload: stored.payload,
  user_id: task.user_id,
  next_run_date: iso(task.next_run_at),
  metadata: stored.metadata,
  enabled: task.status !== "paused"
})

/** The run fields of a body, those it gives (`null` clears one). */
const runFieldsOf = (body: Api.CronPatch | Api.CronCreate): Record<string, unknown> => {
  const given = body as Readonly<Record<string, unknown>>
  const out: Record<string, unknown> = {}
  for (const key of Crons.PAYLOAD_KEYS) if (given[key] !== undefined) out[key] = given[key]
  return out
}

/** The crons endpoints of `api` (the LangGraph API under one of its prefixes); runs choose among `models`. */
export const layer = (api: LangGraphApi, models: ReadonlyArray<ModelConfig>) =>
  HttpApiBuilder.group(api, "crons", (handlers) =>
    Effect.gen(function*() {
      const store = yield* TaskStore
      const access = yield* Access.make
      const factory = yield* Factory.AgentFactory
      // (`config.yaml` as it is now: its run limits and models)
      const now = yield* Live.choice(models)
      // (the gateway's section is read when it starts)
      const maxPageBytes = (yield* AppConfigService).config.gateway.max_page_bytes
      const limitsOf = ({ app: { config }, models }: Effect.Effect.Success<typeof now>): RunSettings.Limits => ({
        recursionLimit: config.recursion_limit,
        maxRecursionLimit: config.max_recursion_limit,
        models: new Set(models.map((m) => m.name)),
        admin: false,
        // (a cron's input is bounded as a run's: each of its ticks adds it to a thread)
        bounds: InputBounds.fromConfig(config.gateway)
      })

      const stored = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
        Effect.mapError(effect, (error) =>
          error instanceof GatewayError
            ? error
            : new GatewayError({
              reason: "internal",
              message: String((error as { message?: unknown }).message),
              cause: error
            }))

      const unprocessable = (message: string) => fail("unprocessable", message)

      /** The user's cron `id` and its fields, or 404. */
      const owned = (userId: string, id: string) =>
        Effect.flatMap(stored(store.get(id, userId)), (found) => {
          const cron = Option.flatMap(found, (task) => Option.map(Crons.storedOf(task), (fields) => ({ task, fields })))
          return Option.match(cron, { onNone: () => Effect.fail(notFound(`Cron ${id}`)), onSome: Effect.succeed })
        })

      /** The schedule spec (with its end time) and next tick, or 422 naming the field. */
      const scheduleOf = (schedule: string, timezone: string, endTime: string | null, now: number) =>
        Effect.gen(function*() {
          const zone = Schedules.timezoneProblem(timezone)
          if (zone !== undefined) return yield* unprocessable(`timezone: ${zone}.`)
          let end: string | null = null
          if (endTime !== null) {
            const millis = endTime.length <= 64 && /^\d{4}-\d{2}-\d{2}/.test(endTime) ? Date.parse(endTime) : Number.NaN
            if (!Number.isFinite(millis)) {
              const shown = JSON.stringify(endTime.slice(0, 64))
              return yield* unprocessable(`end_time: must be an ISO 8601 time (2026-01-31T09:00:00Z), not ${shown}.`)
            }
            end = new Date(millis).toISOString()
          }
          const checked = yield* Either.match(Schedules.check("cron", { cron: schedule }, timezone, now), {
            onLeft: (message) => Effect.fail(unprocessable(`schedule: ${message}.`)),
            onRight: Effect.succeed
          })
          const spec = end === null ? checked.spec : { ...checked.spec, end_time: end }
          const next = Either.getOrElse(Schedules.nextRun("cron", spec, timezone, now), () => null)
          return { spec, next }
        })

      /** The payload checked as its runs will read it, or 422 naming the field. */
      const checkedPayload = (userId: string, payload: Record<string, unknown>, metadata: Record<string, unknown>) =>
        Effect.gen(function*() {
          const size = Buffer.byteLength(JSON.stringify({ payload, metadata }))
          if (size > Crons.MAX_STORED_BYTES) {
            return yield* unprocessable(
              `input, config, context and metadata: ${size} bytes of JSON, more than the ` +
                `${Crons.MAX_STORED_BYTES} a cron keeps.`
            )
          }
          const decoded = yield* Either.match(Crons.payloadOf(payload), {
            onLeft: (message) => Effect.fail(unprocessable(message)),
            onRight: Effect.succeed
          })
          const credential = RunSettings.metadataRefusal(decoded.metadata, decoded.config?.metadata)
          if (credential !== undefined) return yield* unprocessable(credential.message)
          const prepared = yield* Either.match(RunSettings.prepare(decoded, limitsOf(yield* now)), {
            onLeft: ({ message, reason }) =>
              Effect.fail(reason === "too_large" ? fail(reason, message) : unprocessable(message)),
            onRight: Effect.succeed
          })
          // the agent the cron names is its user's (or a shared one), resolved as its runs will be: an unknown
          // assistant is a 404, as a run's
          yield* Effect.mapError(
            factory.resolve(prepared.settings, userId),
            (error) => Access.settingsRefusal(error, decoded.assistant_id)
          )
        })

      const create = (threadId: string | undefined) =>
        Effect.gen(function*() {
          const { user } = yield* CurrentIdentity
          const request = yield* Body.json(Api.CronCreate)
          if (threadId !== undefined) yield* access.ownedThread(user, threadId)
          const now = yield* Clock.currentTimeMillis
          const timezone = request.timezone ?? "UTC"
          const schedule = yield* scheduleOf(request.schedule, timezone, request.end_time ?? null, now)
          const assistantId = request.assistant_id ?? Protocol.LEAD_AGENT
          const metadata = request.metadata ?? {}
          const payload = RunSettings.keptFields({ assistant_id: assistantId, ...runFieldsOf(request) })
          yield* checkedPayload(user, payload, metadata)
          if ((yield* stored(store.crons(user))).length >= MAX_CRONS_PER_USER) {
            return yield* fail("conflict", `A user has at most ${MAX_CRONS_PER_USER} crons; delete one first.`)
          }
          const fields: Crons.Stored = {
            payload,
            metadata,
            on_run_completed: threadId === undefined ? (request.on_run_completed ?? "delete") : null
          }
          const at = new Date(now).toISOString()
          const task: Task = {
            id: Crypto.randomUUID(),
            user_id: user,
            thread_id: threadId ?? null,
            context_mode: threadId === undefined ? "fresh_thread_per_run" : "reuse_thread",
            assistant_id: assistantId,
            title: "LangGraph cron",
            prompt: "",
            schedule_type: "cron",
            schedule_spec: schedule.spec,
            timezone,
            status: request.enabled === false ? "paused" : "enabled",
            next_run_at: schedule.next,
            ...neverRun(at),
            cron: fields
          }
          yield* stored(store.create(task))
          return json(Api.CronObject, cronObject(task, fields))
        })

      /** The user's crons a search or count filters. */
      const matching = (
        userId: string,
        filter: {
          readonly assistant_id?: string | null | undefined
          readonly thread_id?: string | null | undefined
          readonly metadata?: Readonly<Record<string, unknown>> | null | undefined
        }
      ) =>
        Effect.map(stored(store.crons(userId)), (tasks) =>
          tasks.flatMap((task) => Option.toArray(Option.map(Crons.storedOf(task), (cron) => cronObject(task, cron))))
            .filter((cron) =>
              (filter.assistant_id == null || cron.assistant_id === filter.assistant_id) &&
              (filter.thread_id == null || cron.thread_id === filter.thread_id) &&
              Object.entries(filter.metadata ?? {}).every(([key, value]) => sameJson(cron.metadata[key], value))
            ))

      return handlers
        .handleRaw("createThreadCron", ({ path }) => create(path.thread_id))
        .handleRaw("createCron", () => create(undefined))
        .handleRaw("searchCrons", () =>
          Effect.gen(function*() {
            const { user } = yield* CurrentIdentity
            const request = yield* Body.json(Api.CronSearch)
            const found = (yield* matching(user, request))
              .filter((cron) => request.enabled == null || cron.enabled === request.enabled)
            const key = request.sort_by ?? "created_at"
            const direction = (request.sort_order ?? "desc") === "asc" ? 1 : -1
            const ordered = [...found].sort((a, b) => {
              const x = a[key] ?? ""
              const y = b[key] ?? ""
              return x < y ? -direction : x > y ? direction : 0
            })
            const offset = request.offset ?? 0
            const page = ordered.slice(offset, offset + (request.limit ?? 10))
            const select = request.select
            const now = new Date(yield* Clock.currentTimeMillis).toISOString()
            const shown = select == null || select.length === 0
              ? page
              : page.map((cron) => {
                const full: Record<string, unknown> = { ...cron, now }
                return Object.fromEntries(select.map((field) => [field, full[field] ?? null]))
              })
            // (each cron holds its payload, up to Crons.MAX_STORED_BYTES: a page of them ends at max_page_bytes)
            return jsonPage(Api.CronList, shown, maxPageBytes)
          }))
        .handleRaw("countCrons", () =>
          Effect.gen(function*() {
            const { user } = yield* CurrentIdentity
            const request = yield* Body.json(Api.CronCount)
            return HttpServerResponse.unsafeJson((yield* matching(user, request)).length)
          }))
        .handleRaw("updateCron", ({ path }) =>
          Effect.gen(function*() {
            const { user } = yield* CurrentIdentity
            const { fields, task } = yield* owned(user, path.cron_id)
            const request = yield* Body.json(Api.CronPatch)
            const now = yield* Clock.currentTimeMillis
            const patch: { -readonly [K in keyof TaskPatch]: TaskPatch[K] } = {}
            const currentEnd = typeof task.schedule_spec.end_time === "string" ? task.schedule_spec.end_time : null
            const enabled = request.enabled ?? task.status !== "paused"
            const rescheduled = request.schedule != null || request.timezone != null ||
              request.end_time !== undefined || (enabled && task.status === "paused")
            if (rescheduled) {
              const timezone = request.timezone ?? task.timezone
              const schedule = yield* scheduleOf(
                request.schedule ?? (typeof task.schedule_spec.cron === "string" ? task.schedule_spec.cron : ""),
                timezone,
                request.end_time !== undefined ? request.end_time : currentEnd,
                now
              )
              // (resumed: from its next tick after now; the ticks missed while paused are not run)
              patch.schedule_spec = schedule.spec
              patch.timezone = timezone
              patch.next_run_at = schedule.next
            }
            patch.status = enabled ? "enabled" : "paused"
            const given = runFieldsOf(request)
            let payload: Record<string, unknown> = { ...fields.payload }
            for (const [key, value] of Object.entries(given)) {
              if (value === null) delete payload[key]
              else payload[key] = value
            }
            payload = RunSettings.keptFields(payload)
            const metadata = request.metadata !== undefined ? (request.metadata ?? {}) : fields.metadata
            yield* checkedPayload(user, payload, metadata)
            const next: Crons.Stored = {
              payload,
              metadata,
              on_run_completed: task.thread_id === null ? (request.on_run_completed ?? fields.on_run_completed) : null
            }
            patch.cron = next
            const updated = yield* stored(store.update(task.id, user, patch, new Date(now).toISOString()))
            if (Option.isNone(updated)) return yield* notFound(`Cron ${path.cron_id}`)
            return json(Api.CronObject, cronObject(updated.value, next))
          }))
        .handleRaw("deleteCron", ({ path }) =>
          Effect.gen(function*() {
            const { user } = yield* CurrentIdentity
            yield* owned(user, path.cron_id)
            if (!(yield* stored(store.remove(path.cron_id, user)))) return yield* notFound(`Cron ${path.cron_id}`)
            return HttpServerResponse.empty({ status: 204 })
          }))
    }))
