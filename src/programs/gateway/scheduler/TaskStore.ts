/**
 * Where scheduled tasks and their runs are kept: two tables beside the threads, in the thread store's database
 * (the SQLite file, or the PostgreSQL database of `database.url`, see `SqliteTasks` / `PgTasks`), so tasks survive
 * a restart and several gateway processes sharing the database see the same ones. The SQL is written once, over
 * `Sql` (a statement with `?` placeholders and its rows), and runs on both.
 *
 * A tick is taken by one process only: `claim` moves the task's `next_run_at` from the time it was due to the
 * next one in a single conditional UPDATE (compare-and-set), which succeeds for exactly one of the processes that
 * saw the task due; the others find it already moved. Its run is admitted (a `queued` row) before the tick is
 * taken, so a tick taken always has its row: one whose process stopped before starting its run is taken over
 * (`retake`, compare-and-set again) and started by another (see `Scheduler`).
 *
 * Rows are decoded with Schema when read (another process or an older build may have written them).
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { StoreError } from "../../../services/RunContext.js"

/** A statement and its parameters (`?` placeholders), answering its rows (RETURNING's, for a write). */
export interface Sql {
  readonly query: (
    text: string,
    params: ReadonlyArray<unknown>
  ) => Effect.Effect<ReadonlyArray<Record<string, unknown>>, StoreError>
}

/** How a task stands (DeerFlow's statuses; `running`: a `once` task whose run has not ended). */
export const TaskStatus = Schema.Literal("enabled", "paused", "running", "completed", "failed", "cancelled")
export type TaskStatus = typeof TaskStatus.Type

/** How a run of a task stands. */
export const TaskRunStatus = Schema.Literal("queued", "running", "success", "failed", "skipped", "interrupted")
export type TaskRunStatus = typeof TaskRunStatus.Type

/** A scheduled task as stored. `thread_id` is the thread as its user's client names it. */
export interface Task {
  readonly id: string
  readonly user_id: string
  readonly thread_id: string | null
  readonly context_mode: "fresh_thread_per_run" | "reuse_thread"
  readonly assistant_id: string
  readonly title: string
  readonly prompt: string
  readonly schedule_type: "once" | "cron"
  readonly schedule_spec: Readonly<Record<string, unknown>>
  readonly timezone: string
  readonly status: TaskStatus
  /** Epoch milliseconds of the next tick, or null (none: a `once` task that ran, or a paused one's is kept). */
  readonly next_run_at: number | null
  readonly last_run_at: string | null
  readonly last_run_id: string | null
  readonly last_thread_id: string | null
  readonly last_error: string | null
  readonly run_count: number
  readonly created_at: string
  readonly updated_at: string
  /**
   * A LangGraph cron's own fields (its run payload, metadata...: see `../Crons.ts`), kept as the JSON they are;
   * none for DeerFlow's scheduled tasks. Crons are ticked by the same scheduler; DeerFlow's endpoints do not
   * list them (`list`, `count`), the crons endpoints list only them (`crons`).
   */
  readonly cron?: Readonly<Record<string, unknown>> | null | undefined
}

/** One run of a task (a tick, or a manual trigger). `thread_id` as the task's user's client names it. */
export interface TaskRun {
  readonly id: string
  readonly task_id: string
  readonly user_id: string
  readonly thread_id: string
  readonly run_id: string | null
  readonly scheduled_for: string
  readonly trigger: "scheduled" | "manual"
  readonly status: TaskRunStatus
  readonly error: string | null
  readonly started_at: string | null
  readonly finished_at: string | null
  readonly created_at: string
}

/** What of a task may change (`updated_at` is set by the store). */
export type TaskPatch = Partial<Omit<Task, "id" | "user_id" | "created_at" | "updated_at">>

/** What of a task run may change. */
export type TaskRunPatch = Partial<
  Pick<TaskRun, "thread_id" | "run_id" | "status" | "error" | "started_at" | "finished_at">
>

/** The store of scheduled tasks. Every operation on a task names its user: another user's task is none. */
export interface Service {
  readonly create: (task: Task) => Effect.Effect<void, StoreError>
  readonly get: (id: string, userId: string) => Effect.Effect<Option.Option<Task>, StoreError>
  /** The user's tasks (of one thread, when given), newest first; not their crons. */
  readonly list: (userId: string, threadId?: string) => Effect.Effect<ReadonlyArray<Task>, StoreError>
  /** How many tasks the user has (not counting their crons). */
  readonly count: (userId: string) => Effect.Effect<number, StoreError>
  /** The user's LangGraph crons (tasks with `cron`), newest first. */
  readonly crons: (userId: string) => Effect.Effect<ReadonlyArray<Task>, StoreError>
  /** Changes the user's task; none when it has none of that id. */
  readonly update: (
    id: string,
    userId: string,
    patch: TaskPatch,
    now: string
  ) => Effect.Effect<Option.Option<Task>, StoreError>
  /** Deletes the user's task and its runs; whether there was one. */
  readonly remove: (id: string, userId: string) => Effect.Effect<boolean, StoreError>
  /** Enabled tasks of every user whose tick is due at `now` (epoch milliseconds), the oldest tick first. */
  readonly due: (now: number, limit: number) => Effect.Effect<ReadonlyArray<Task>, StoreError>
  /**
   * Takes the tick of `task` due at `task.next_run_at`: moves it to `next` (and the status to `status`) if no
   * one did first. Whether this caller took it.
   */
  readonly claim: (
    task: Task,
    next: number | null,
    status: TaskStatus,
    now: string
  ) => Effect.Effect<boolean, StoreError>
  /**
   * Records a run of a task; a `queued` or `running` one only when the task has none of those (one run at a time,
   * across processes: a unique index). Whether it was recorded.
   */
  readonly addRun: (run: TaskRun) => Effect.Effect<boolean, StoreError>
  /** Deletes a run still `queued` (admitted for a tick another process took first); whether there was one. */
  readonly removeRun: (id: string) => Effect.Effect<boolean, StoreError>
  /**
   * Takes over a run admitted (`queued`) at `createdAt` and never started (its process stopped in between): marks
   * it admitted again at `now` if no one did first. Whether this caller took it.
   */
  readonly retake: (id: string, createdAt: string, now: string) => Effect.Effect<boolean, StoreError>
  /** How many runs of the task were started. */
  readonly launched: (taskId: string) => Effect.Effect<number, StoreError>
  readonly updateRun: (id: string, patch: TaskRunPatch) => Effect.Effect<void, StoreError>
  /** A task's runs, newest first. */
  readonly runs: (taskId: string, limit: number, offset: number) => Effect.Effect<ReadonlyArray<TaskRun>, StoreError>
  /** The task's run still `queued` or `running`, if it has one. */
  readonly active: (taskId: string) => Effect.Effect<Option.Option<TaskRun>, StoreError>
  /** How many runs of the user's tasks are `queued` or `running`. */
  readonly activeOfUser: (userId: string) => Effect.Effect<number, StoreError>
  /** Runs of every task still `queued` or `running` (for the bookkeeping after a restart). */
  readonly unfinishedRuns: Effect.Effect<ReadonlyArray<TaskRun>, StoreError>
  /** Tasks of every user whose status is `running` (`once` tasks whose run has not ended, or not been recorded so). */
  readonly runningTasks: Effect.Effect<ReadonlyArray<Task>, StoreError>
}

/** The bookkeeping of a task made at `at`: never run yet. */
export const neverRun = (at: string) => ({
  last_run_at: null,
  last_run_id: null,
  last_thread_id: null,
  last_error: null,
  run_count: 0,
  created_at: at,
  updated_at: at
})

/** The scheduled task store. */
export class TaskStore extends Context.Tag("antler/gateway/TaskStore")<TaskStore, Service>() {}

/** The tables (the same statements for SQLite and PostgreSQL). */
export const MIGRATIONS: ReadonlyArray<string> = [
  `CREATE TABLE IF NOT EXISTS antler_scheduled_tasks (
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL,
    thread_id TEXT,
    context_mode TEXT NOT NULL,
    assistant_id TEXT NOT NULL,
    title TEXT NOT NULL,
    prompt TEXT NOT NULL,
    schedule_type TEXT NOT NULL,
    schedule_spec TEXT NOT NULL,
    timezone TEXT NOT NULL,
    status TEXT NOT NULL,
    next_run_at BIGINT,
    last_run_at TEXT,
    last_run_id TEXT,
    last_thread_id TEXT,
    last_error TEXT,
    run_count INTEGER NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
  )`,
  `CREATE INDEX IF NOT EXISTS antler_scheduled_tasks_user ON antler_scheduled_tasks (user_id, created_at)`,
  `CREATE INDEX IF NOT EXISTS antler_scheduled_tasks_due ON antler_scheduled_tasks (status, next_run_at)`,
  `CREATE TABLE IF NOT EXISTS antler_scheduled_task_runs (
    id TEXT PRIMARY KEY,
    task_id TEXT NOT NULL,
    user_id TEXT NOT NULL,
    thread_id TEXT NOT NULL,
    run_id TEXT,
    scheduled_for TEXT NOT NULL,
    trigger_kind TEXT NOT NULL,
    status TEXT NOT NULL,
    error TEXT,
    started_at TEXT,
    finished_at TEXT,
    created_at TEXT NOT NULL
  )`,
  `CREATE INDEX IF NOT EXISTS antler_scheduled_task_runs_task ON antler_scheduled_task_runs (task_id, created_at)`,
  `CREATE INDEX IF NOT EXISTS antler_scheduled_task_runs_status ON antler_scheduled_task_runs (status, user_id)`,
  // a task's one active run: a second is not recorded, so it is not started (whichever process asks)
  `CREATE UNIQUE INDEX IF NOT EXISTS antler_scheduled_task_runs_active ON antler_scheduled_task_runs (task_id)
    WHERE status IN ('queued', 'running')`
]

const Text = Schema.String
const NullableText = Schema.NullOr(Schema.String)
/** A number as a driver gives it (PostgreSQL's BIGINT is a string). */
const Int = Schema.Union(Schema.Number, Schema.NumberFromString)

const TaskRow = Schema.Struct({
  id: Text,
  user_id: Text,
  thread_id: NullableText,
  context_mode: Schema.Literal("fresh_thread_per_run", "reuse_thread"),
  assistant_id: Text,
  title: Text,
  prompt: Text,
  schedule_type: Schema.Literal("once", "cron"),
  schedule_spec: Schema.parseJson(Schema.Record({ key: Schema.String, value: Schema.Unknown })),
  timezone: Text,
  status: TaskStatus,
  next_run_at: Schema.NullOr(Int),
  last_run_at: NullableText,
  last_run_id: NullableText,
  last_thread_id: NullableText,
  last_error: NullableText,
  run_count: Int,
  created_at: Text,
  updated_at: Text,
  cron: Schema.optional(Schema.NullOr(Schema.parseJson(Schema.Record({ key: Schema.String, value: Schema.Unknown }))))
})

const TaskRunRow = Schema.Struct({
  id: Text,
  task_id: Text,
  user_id: Text,
  thread_id: Text,
  run_id: NullableText,
  scheduled_for: Text,
  trigger_kind: Schema.Literal("scheduled", "manual"),
  status: TaskRunStatus,
  error: NullableText,
  started_at: NullableText,
  finished_at: NullableText,
  created_at: Text
})

const decodeTasks = Schema.decodeUnknownEither(Schema.Array(TaskRow))
const decodeRuns = Schema.decodeUnknownEither(Schema.Array(TaskRunRow))

const unreadable = (table: string) => (error: { readonly message: string }) =>
  new StoreError({ operation: "read", message: `A row of ${table} is not one this build reads: ${error.message}` })

const tasksOf = (rows: ReadonlyArray<unknown>): Effect.Effect<ReadonlyArray<Task>, StoreError> =>
  Either.match(decodeTasks(rows), {
    onLeft: (error) => Effect.fail(unreadable("the scheduled tasks")(error)),
    onRight: (decoded) => Effect.succeed(decoded)
  })

const runsOf = (rows: ReadonlyArray<unknown>): Effect.Effect<ReadonlyArray<TaskRun>, StoreError> =>
  Either.match(decodeRuns(rows), {
    onLeft: (error) => Effect.fail(unreadable("the scheduled task runs")(error)),
    onRight: (decoded) => Effect.succeed(decoded.map(({ trigger_kind, ...run }) => ({ ...run, trigger: trigger_kind })))
  })

const TASK_COLUMNS = [
  "id",
  "user_id",
  "thread_id",
  "context_mode",
  "assistant_id",
  "title",
  "prompt",
  "schedule_type",
  "schedule_spec",
  "timezone",
  "status",
  "next_run_at",
  "last_run_at",
  "last_run_id",
  "last_thread_id",
  "last_error",
  "run_count",
  "created_at",
  "updated_at",
  "cron"
] as const

/** A task field as its column holds it. */
const columnValue = (key: string, value: unknown): unknown =>
  key === "schedule_spec" || (key === "cron" && value != null) ? JSON.stringify(value) : (value ?? null)

/**
 * The `cron` column, added to a table an earlier build made: added when a read of it fails (the same statements
 * on SQLite and PostgreSQL, which answer a second ADD COLUMN with an error; of two processes adding it at once,
 * the loser finds it there).
 */
const cronColumn = (sql: Sql) => {
  const probe = sql.query("SELECT cron FROM antler_scheduled_tasks WHERE 1 = 0", [])
  return Effect.asVoid(probe.pipe(
    Effect.orElse(() =>
      sql.query("ALTER TABLE antler_scheduled_tasks ADD COLUMN cron TEXT", []).pipe(Effect.orElse(() => probe))
    )
  ))
}

/** The store over a database's `Sql` (its tables made when missing). */
export const make = (sql: Sql): Effect.Effect<Service, StoreError> =>
  Effect.gen(function*() {
    for (const statement of MIGRATIONS) yield* sql.query(statement, [])
    yield* cronColumn(sql)
    const TASKS = `SELECT ${TASK_COLUMNS.join(", ")} FROM antler_scheduled_tasks`
    const RUNS = "SELECT id, task_id, user_id, thread_id, run_id, scheduled_for, trigger_kind, status, error, " +
      "started_at, finished_at, created_at FROM antler_scheduled_task_runs"

    const get: Service["get"] = (id, userId) =>
      Effect.map(
        Effect.flatMap(sql.query(`${TASKS} WHERE id = ? AND user_id = ?`, [id, userId]), tasksOf),
        (tasks) => Option.fromNullable(tasks[0])
      )

    return {
      create: (task) =>
        Effect.asVoid(sql.query(
          `INSERT INTO antler_scheduled_tasks (${TASK_COLUMNS.join(", ")}) ` +
            `VALUES (${TASK_COLUMNS.map(() => "?").join(", ")})`,
          TASK_COLUMNS.map((column) => columnValue(column, task[column]))
        )),
      get,
      list: (userId, threadId) =>
        Effect.flatMap(
          threadId === undefined
            ? sql.query(`${TASKS} WHERE user_id = ? AND cron IS NULL ORDER BY created_at DESC, id DESC`, [userId])
            : sql.query(
              `${TASKS} WHERE user_id = ? AND thread_id = ? AND cron IS NULL ORDER BY created_at DESC, id DESC`,
              [userId, threadId]
            ),
          tasksOf
        ),
      count: (userId) =>
        Effect.map(
          sql.query("SELECT COUNT(*) AS n FROM antler_scheduled_tasks WHERE user_id = ? AND cron IS NULL", [userId]),
          (rows) => Number(rows[0]?.n ?? 0)
        ),
      crons: (userId) =>
        Effect.flatMap(
          sql.query(`${TASKS} WHERE user_id = ? AND cron IS NOT NULL ORDER BY created_at DESC, id DESC`, [userId]),
          tasksOf
        ),
      update: (id, userId, patch, now) =>
        Effect.gen(function*() {
          const entries = Object.entries(patch).filter(([key, value]) =>
            value !== undefined && (TASK_COLUMNS as ReadonlyArray<string>).includes(key))
          const sets = [...entries.map(([key]) => `${key} = ?`), "updated_at = ?"]
          const params = [...entries.map(([key, value]) => columnValue(key, value)), now, id, userId]
          const changed = yield* sql.query(
            `UPDATE antler_scheduled_tasks SET ${sets.join(", ")} WHERE id = ? AND user_id = ? RETURNING id`,
            params
          )
          return changed.length === 0 ? Option.none() : yield* get(id, userId)
        }),
      remove: (id, userId) =>
        Effect.gen(function*() {
          const removed = yield* sql.query(
            "DELETE FROM antler_scheduled_tasks WHERE id = ? AND user_id = ? RETURNING id",
            [id, userId]
          )
          if (removed.length === 0) return false
          yield* sql.query("DELETE FROM antler_scheduled_task_runs WHERE task_id = ? AND user_id = ?", [id, userId])
          return true
        }),
      due: (now, limit) =>
        Effect.flatMap(
          sql.query(
            `${TASKS} WHERE status = 'enabled' AND next_run_at IS NOT NULL AND next_run_at <= ? ` +
              "ORDER BY next_run_at, id LIMIT ?",
            [now, limit]
          ),
          tasksOf
        ),
      claim: (task, next, status, now) =>
        task.next_run_at === null
          ? Effect.succeed(false)
          : Effect.map(
            sql.query(
              "UPDATE antler_scheduled_tasks SET next_run_at = ?, status = ?, updated_at = ? " +
                "WHERE id = ? AND status = 'enabled' AND next_run_at = ? RETURNING id",
              [next, status, now, task.id, task.next_run_at]
            ),
            (rows) => rows.length === 1
          ),
      addRun: (run) =>
        Effect.map(sql.query(
          "INSERT INTO antler_scheduled_task_runs (id, task_id, user_id, thread_id, run_id, scheduled_for, " +
            "trigger_kind, status, error, started_at, finished_at, created_at) " +
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) " +
            "ON CONFLICT DO NOTHING RETURNING id",
          [
            run.id,
            run.task_id,
            run.user_id,
            run.thread_id,
            run.run_id,
            run.scheduled_for,
            run.trigger,
            run.status,
            run.error,
            run.started_at,
            run.finished_at,
            run.created_at
          ]
        ), (rows) => rows.length === 1),
      removeRun: (id) =>
        Effect.map(
          sql.query("DELETE FROM antler_scheduled_task_runs WHERE id = ? AND status = 'queued' RETURNING id", [id]),
          (rows) => rows.length === 1
        ),
      retake: (id, createdAt, now) =>
        Effect.map(
          sql.query(
            "UPDATE antler_scheduled_task_runs SET created_at = ? " +
              "WHERE id = ? AND status = 'queued' AND run_id IS NULL AND created_at = ? RETURNING id",
            [now, id, createdAt]
          ),
          (rows) => rows.length === 1
        ),
      launched: (taskId) =>
        Effect.map(
          sql.query(
            "SELECT COUNT(*) AS n FROM antler_scheduled_task_runs WHERE task_id = ? AND run_id IS NOT NULL",
            [taskId]
          ),
          (rows) => Number(rows[0]?.n ?? 0)
        ),
      updateRun: (id, patch) => {
        const entries = Object.entries(patch).filter(([, value]) => value !== undefined)
        if (entries.length === 0) return Effect.void
        return Effect.asVoid(sql.query(
          `UPDATE antler_scheduled_task_runs SET ${entries.map(([key]) => `${key} = ?`).join(", ")} WHERE id = ?`,
          [...entries.map(([, value]) => value), id]
        ))
      },
      runs: (taskId, limit, offset) =>
        Effect.flatMap(
          sql.query(
            `${RUNS} WHERE task_id = ? ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?`,
            [taskId, limit, offset]
          ),
          runsOf
        ),
      active: (taskId) =>
        Effect.map(
          Effect.flatMap(sql.query(`${RUNS} WHERE task_id = ? AND status IN ('queued', 'running')`, [taskId]), runsOf),
          (runs) => Option.fromNullable(runs[0])
        ),
      activeOfUser: (userId) =>
        Effect.map(
          sql.query(
            "SELECT COUNT(*) AS n FROM antler_scheduled_task_runs " +
              "WHERE user_id = ? AND status IN ('queued', 'running')",
            [userId]
          ),
          (rows) => Number(rows[0]?.n ?? 0)
        ),
      unfinishedRuns: Effect.flatMap(sql.query(`${RUNS} WHERE status IN ('queued', 'running')`, []), runsOf),
      runningTasks: Effect.flatMap(sql.query(`${TASKS} WHERE status = 'running'`, []), tasksOf)
    }
  })
