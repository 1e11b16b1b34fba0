/**
 * The schedules of scheduled tasks, as DeerFlow takes them: `once` (`schedule_spec.run_at`, an ISO 8601 time; one
 * without an offset is a wall-clock time in the task's `timezone`, as a cron's fields are) or `cron`
 * (`schedule_spec.cron`, five fields: minute, hour, day of month, month, day of week, read in the task's IANA
 * `timezone`; with `schedule_spec.end_time`, a LangGraph cron's, no tick after that time). Checked when a task is
 * created or changed, each problem said in words; `nextRun` is the first time after `now` the schedule fires (none
 * for a `once` whose time has passed, or a cron past its end).
 */
import * as Cron from "effect/Cron"
import * as DateTime from "effect/DateTime"
import * as Either from "effect/Either"
import * as Option from "effect/Option"

/** The kinds of schedule. */
export type ScheduleType = "once" | "cron"

/** A schedule as checked: its normalised spec and its next run time (epoch milliseconds, or none). */
export interface Checked {
  readonly spec: Record<string, unknown>
  readonly next: number | null
}

/** The longest cron expression or run time read. */
const MAX_SPEC_TEXT = 200

/** Why `timezone` is not an IANA time zone, if it is not. */
export const timezoneProblem = (timezone: string): string | undefined =>
  timezone.length > 0 && timezone.length <= 64 && Option.isSome(DateTime.zoneMakeNamed(timezone))
    ? undefined
    : `Unknown timezone: ${JSON.stringify(timezone.slice(0, 64))} (an IANA time zone such as "UTC" or "Asia/Shanghai")`

/** A cron expression with its fields separated by single spaces, or why it is not one of five fields. */
export const normalizeCron = (expression: string): Either.Either<string, string> => {
  if (expression.length > MAX_SPEC_TEXT) {
    return Either.left(`Cron expression is longer than ${MAX_SPEC_TEXT} characters`)
  }
  const fields = expression.split(/\s+/).filter((field) => field !== "")
  return fields.length === 5
    ? Either.right(fields.join(" "))
    : Either.left(`Cron expression must contain exactly 5 fields (minute hour day month weekday), not ${fields.length}`)
}

const parseCron = (expression: string, timezone: string): Either.Either<Cron.Cron, string> =>
  Either.flatMap(normalizeCron(expression), (normal) =>
    Either.mapLeft(
      Cron.parse(normal, timezone),
      (error) => `Invalid cron expression ${JSON.stringify(normal)}: ${error.message}`
    ))

/**
 * The time of a `once` schedule's `run_at`, or why it is not one: one without an offset is read in `zone` (a time a
 * change of the clocks skips is read with the offset before it, as Python's `zoneinfo` reads it for DeerFlow).
 */
const parseRunAt = (runAt: string, zone: DateTime.TimeZone): Either.Either<number, string> => {
  if (runAt.length > MAX_SPEC_TEXT || !/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}/.test(runAt)) {
    return Either.left(
      "run_at must be an ISO 8601 date and time (2026-01-31T09:00:00+08:00), " +
        `not ${JSON.stringify(runAt.slice(0, 60))}`
    )
  }
  const offset = /(Z|[+-]\d{2}:?\d{2})$/i.test(runAt)
  const millis = Date.parse(offset ? runAt : `${runAt}Z`)
  if (!Number.isFinite(millis)) return Either.left(`run_at is not a valid time: ${JSON.stringify(runAt)}`)
  if (offset) return Either.right(millis)
  return Either.fromOption(
    Option.map(
      DateTime.makeZoned(millis, { timeZone: zone, adjustForTimeZone: true }),
      DateTime.toEpochMillis
    ),
    () => `run_at is not a valid time in the task's timezone: ${JSON.stringify(runAt)}`
  )
}

/**
 * The first time after `now` (epoch milliseconds) the schedule fires, or null when it never does again (a `once`
 * whose time is not after `now`); or why the schedule is not one.
 */
export const nextRun = (
  type: ScheduleType,
  spec: Readonly<Record<string, unknown>>,
  timezone: string,
  now: number
): Either.Either<number | null, string> => {
  const problem = timezoneProblem(timezone)
  if (problem !== undefined) return Either.left(problem)
  if (type === "once") {
    const runAt = spec.run_at
    if (typeof runAt !== "string") return Either.left("A once schedule requires schedule_spec.run_at")
    const zone = Option.getOrThrow(DateTime.zoneMakeNamed(timezone))
    return Either.map(parseRunAt(runAt, zone), (at) => (at > now ? at : null))
  }
  const cron = spec.cron
  if (typeof cron !== "string") return Either.left("A cron schedule requires schedule_spec.cron")
  // a LangGraph cron's `end_time`: no tick after it
  const end = typeof spec.end_time === "string" ? Date.parse(spec.end_time) : Number.POSITIVE_INFINITY
  return Either.flatMap(parseCron(cron, timezone), (parsed) =>
    Either.map(
      // (fields each valid may name no date at all, `0 0 31 2 *`: `Cron.next` throws finding none)
      Either.try({
        try: () => Cron.next(parsed, new Date(now)).getTime(),
        catch: () => `Cron expression ${JSON.stringify(cron)} never fires: no date has that day in those months`
      }),
      (next) => (next > end ? null : next)
    ))
}

/** Checks a schedule at the boundary: its normalised spec (the cron's fields single-spaced) and next run. */
export const check = (
  type: ScheduleType,
  spec: Readonly<Record<string, unknown>>,
  timezone: string,
  now: number
): Either.Either<Checked, string> => {
  const normal: Record<string, unknown> = type === "cron"
    ? (typeof spec.cron === "string"
      ? Either.match(normalizeCron(spec.cron), { onLeft: () => ({ cron: spec.cron }), onRight: (cron) => ({ cron }) })
      : {})
    : (typeof spec.run_at === "string" ? { run_at: spec.run_at } : {})
  return Either.flatMap(nextRun(type, normal, timezone, now), (next) => {
    if (type === "once" && next === null) return Either.left("A once schedule must be in the future")
    return Either.right({ spec: normal, next })
  })
}
