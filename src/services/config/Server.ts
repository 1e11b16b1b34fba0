/**
 * The sections of `config.yaml` that configure Antler as a server: where threads are stored (`database`), the
 * gateway (`gateway`: address, tokens and accounts, CORS, allowed hosts, streams, the scheduler) and traces
 * (`tracing`). Re-exported by `AppConfig`.
 */
import * as Schema from "effect/Schema"
import { BaseUrl, NonNegativeInt, PositiveInt, withDefault } from "./Fields.js"

const PostgresUrl = Schema.String.pipe(
  Schema.filter((url) => /^postgres(ql)?:\/\/\S+$/.test(url) || "expected a postgres:// or postgresql:// URL")
)

/**
 * Where threads are stored (DeerFlow's `database` section): SQLite under the data directory by default, or
 * PostgreSQL at `url` (`postgres_url` is DeerFlow's spelling), so several gateway processes share threads.
 * The URL is a secret (it may hold a password): it is never printed.
 */
export const DatabaseConfig = Schema.Struct({
  backend: Schema.optional(Schema.NullOr(Schema.Literal("sqlite", "postgres"))),
  url: Schema.optional(Schema.NullOr(Schema.Redacted(PostgresUrl))),
  postgres_url: Schema.optional(Schema.NullOr(Schema.Redacted(PostgresUrl)))
}).pipe(
  Schema.filter((c) =>
    c.backend !== "postgres" || c.url != null || c.postgres_url != null ||
    "backend postgres needs database.url (postgres://user:password@host:port/database)"
  ),
  Schema.filter((c) =>
    c.backend !== "sqlite" || (c.url == null && c.postgres_url == null) ||
    "backend sqlite takes no database.url; remove it, or set backend: postgres"
  )
)
export type DatabaseConfig = typeof DatabaseConfig.Type

/**
 * A token of the gateway and the user it stands for (`gateway.auth.tokens[]`), with the user's role. An `admin` token's
 * runs may also change what every user's agent reads (the default agent's `SOUL.md`); no other token's may (see
 * `gateway/Auth.ts`).
 */
export const GatewayToken = Schema.Struct({
  token: Schema.Redacted(
    Schema.String.pipe(Schema.minLength(16, { message: () => "a token must be at least 16 characters long" }))
  ),
  user: Schema.String.pipe(
    Schema.pattern(/^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/, {
      message: () => "user ids are 1-128 letters, digits, '.', '_' or '-', starting with a letter or digit"
    })
  ),
  admin: withDefault(Schema.Boolean, () => false),
  /**
   * The user's role for `authorization` (its roles' names); default `admin` for an admin token, else `user`,
   * DeerFlow's two account roles. It grants nothing by itself: `admin` above is what lets a run change shared files.
   */
  role: Schema.optional(
    Schema.String.pipe(
      Schema.pattern(/^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$/, {
        message: () => "a role is 1-64 letters, digits, '.', '_', ':' or '-', starting with a letter or digit"
      })
    )
  )
})
export type GatewayToken = typeof GatewayToken.Type

/** An entry of `gateway.allowed_hosts`: `name`, `name:port`, `[v6]` or `[v6]:port`. */
const AllowedHost = Schema.String.pipe(
  Schema.pattern(/^(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+)(?::\d{1,5})?$/, {
    message: () => "an allowed host is a host name or address, with an optional :port (no scheme, no path)"
  })
)

/**
 * `gateway.cluster`: `antler serve` as one runner of a cluster on @effect/cluster, with PostgreSQL (`database.url`)
 * as its storage. Each thread is an entity owned by one runner (its shard's); any process accepts a request
 * about it and routes it there. Runners talk to each other on `runner_port` (plain TCP, unencrypted: a private
 * network only), authenticated by `secret` when there is one. Absent: one process, no cluster.
 */
export const ClusterConfig = Schema.Struct({
  /** The address other runners reach this one at (not a wildcard). */
  runner_host: withDefault(Schema.NonEmptyTrimmedString, () => "127.0.0.1"),
  /** The port other runners reach this one at. */
  runner_port: Schema.Number.pipe(Schema.int(), Schema.between(1, 65535)),
  /** The address this runner listens on (default `runner_host`; `0.0.0.0` in a container). */
  listen_host: Schema.optional(Schema.NonEmptyTrimmedString),
  /** Seconds between checks that the other runners are alive: a dead one's threads move after about this. */
  health_check_seconds: withDefault(Schema.Number.pipe(Schema.positive(), Schema.lessThanOrEqualTo(600)), () => 10),
  /**
   * Seconds a runner stopped with SIGTERM (or giving a thread's shard to a runner that joined) lets the runs it
   * executes go on; past that they are stopped at their last completed step and handed over to the thread's
   * next runner, which resumes them under the same run id.
   */
  drain_seconds: withDefault(Schema.Number.pipe(Schema.nonNegative(), Schema.lessThanOrEqualTo(3600)), () => 20),
  /**
   * A secret every runner of the cluster shares (the same on all; a secret, never printed): a connection to
   * `runner_port` that does not prove it knows it is closed before any of its messages is read.
   */
  secret: Schema.optional(Schema.Redacted(Schema.String.pipe(
    Schema.minLength(16, { message: () => "gateway.cluster.secret must be at least 16 characters" }),
    Schema.maxLength(1024)
  )))
})
export type ClusterConfig = typeof ClusterConfig.Type

/**
 * `gateway.quotas`: what one user may keep, so that no user fills the disk or the database for everyone (an open
 * gateway's local user is one user too). A request past a quota is refused (403) saying which quota, its limit and
 * the user's use; deleting threads (or uploads) frees it. Absent or null: the default; 0: no limit.
 */
export const QuotasConfig = Schema.Struct({
  /** Threads a user may have (made, copied, branched, or made by a run or an upload on a new thread id). */
  max_threads_per_user: withDefault(NonNegativeInt, () => 10_000),
  /**
   * Bytes of files a user's threads may hold on disk, in all (uploads, outputs, workspaces): an upload, a copy or
   * a branch that would take the user past it is refused before anything is written. Default 5 GiB.
   */
  max_user_bytes: withDefault(NonNegativeInt, () => 5 * 1024 ** 3),
  /**
   * Bytes of JSON a user's items in the LangGraph store (`/store/items`) may hold, in all: a put that would take
   * the user past it is refused. Default 100 MiB.
   */
  max_store_bytes_per_user: withDefault(NonNegativeInt, () => 100 * 1024 ** 2),
  /**
   * Bytes one thread may keep in the database (its checkpoints, run records and run events, as stored; its state is
   * folded from them at each run and `GET .../state`): a run, a state update or a copy that would take it past is
   * refused before anything is kept, and a run that takes it past mid-run ends (an error) after that step. Default
   * 64 MiB, far above what DeerFlow's web app makes of a long chat.
   */
  max_thread_bytes: withDefault(NonNegativeInt, () => 64 * 1024 ** 2),
  /**
   * Bytes all of a user's threads may keep in the database, in all (as `max_thread_bytes` counts them): past it the
   * user's runs, state updates and copies are refused, and a run that takes the user past it mid-run ends after that
   * step. Default 1 GiB (16 threads at `max_thread_bytes`, thousands of ordinary chats).
   */
  max_thread_bytes_per_user: withDefault(NonNegativeInt, () => 1024 ** 3)
})
export type QuotasConfig = typeof QuotasConfig.Type

/**
 * `antler serve` (Antler's own section; DeerFlow configures its gateway through the environment). Bound to
 * a loopback address it may run without tokens (every request is user `default`, the CLI's user); bound to
 * any other address it refuses to start without `auth.tokens`.
 */
export const GatewayConfig = Schema.Struct({
  host: withDefault(Schema.NonEmptyTrimmedString, () => "127.0.0.1"),
  port: withDefault(Schema.Number.pipe(Schema.int(), Schema.between(0, 65535)), () => 8001),
  auth: withDefault(
    Schema.Struct({
      tokens: withDefault(Schema.Array(GatewayToken), () => []),
      /**
       * DeerFlow's local accounts (email and password, HttpOnly cookie sessions with a CSRF token), each an
       * Antler user of its own, beside the tokens. The first account is made an admin (`/api/v1/auth/initialize`).
       */
      accounts: withDefault(Schema.Boolean, () => false),
      /** Whether visitors may make their own (non-admin) accounts (`/api/v1/auth/register`; DeerFlow's). */
      allow_registration: withDefault(Schema.Boolean, () => true),
      /** How long a session lasts, in days (DeerFlow's `token_expiry_days`). */
      session_days: withDefault(Schema.Number.pipe(Schema.positive(), Schema.lessThanOrEqualTo(365)), () => 7)
    }),
    () => ({ tokens: [], accounts: false, allow_registration: true, session_days: 7 })
  ),
  cors: withDefault(
    Schema.Struct({ allow_origins: withDefault(Schema.Array(Schema.String), () => []) }),
    () => ({ allow_origins: [] })
  ),
  /**
   * Host names (or addresses) the gateway answers to besides the address it is bound to, each `name` (any port)
   * or `name:port`: the names it is reached by behind a proxy. Any other `Host` is refused (DNS rebinding).
   */
  allowed_hosts: withDefault(Schema.Array(AllowedHost), () => []),
  /** Seconds between `: heartbeat` comments on an idle stream. */
  heartbeat_seconds: withDefault(Schema.Number.pipe(Schema.positive()), () => 15),
  /** Events of a run kept for `Last-Event-ID` replay; a client further behind gets the `gap` event. */
  replay_buffer_events: withDefault(PositiveInt, () => 10_000),
  /** And at most this many MiB of them (a `values` event holds the whole thread). */
  replay_buffer_mb: withDefault(Schema.Number.pipe(Schema.positive()), () => 16),
  /**
   * Finished runs whose events stay joinable (the oldest are forgotten first); runs that ended less than a minute
   * ago stay joinable too, up to 50 times as many.
   */
  finished_runs_kept: withDefault(NonNegativeInt, () => 20),
  /**
   * Runs executing at once in this process (LangGraph's `N_JOBS_PER_WORKER`): past it a run is accepted and waits
   * `pending`, its stream open, until a run ends; a cancelled one never starts. Absent or null: no limit.
   */
  max_active_runs: Schema.optional(Schema.NullOr(PositiveInt)),
  /**
   * Runs of one user executing at once: past it the user's run is accepted and waits `pending` in a line of the
   * user's own, holding none of `max_active_runs`' places, so one user's runs never crowd out the others'. Absent
   * or null: no limit.
   */
  max_active_runs_per_user: Schema.optional(Schema.NullOr(PositiveInt)),
  /**
   * Bytes of JSON one message of a run's input (`input.messages[i]`, `command.resume`, or a message of a state
   * update) may hold: past it the request is a 413 naming the message and the bound. Default 2 MiB.
   */
  max_message_bytes: withDefault(PositiveInt, () => 2 * 1024 ** 2),
  /**
   * Bytes of JSON a run's `input` and `command` may hold together (every message with the rest): past it the
   * request is a 413 naming the bound. Default 4 MiB.
   */
  max_run_input_bytes: withDefault(PositiveInt, () => 4 * 1024 ** 2),
  /**
   * Bytes of JSON a page of a list whose items grow with the thread (a thread's history, its runs) holds at most:
   * the page ends before the item that would pass it (its first item is always answered). Default 32 MiB.
   */
  max_page_bytes: withDefault(PositiveInt, () => 32 * 1024 ** 2),
  /** Seconds between the scheduler's looks for due scheduled tasks; 0: tasks run only when triggered. */
  scheduler_poll_seconds: withDefault(NonNegativeInt, () => 10),
  /** Per-user quotas on threads and on the bytes of their files (see `QuotasConfig`). */
  quotas: withDefault(QuotasConfig, () => ({
    max_threads_per_user: 10_000,
    max_user_bytes: 5 * 1024 ** 3,
    max_store_bytes_per_user: 100 * 1024 ** 2,
    max_thread_bytes: 64 * 1024 ** 2,
    max_thread_bytes_per_user: 1024 ** 3
  })),
  /** Runs the gateway as one runner of a cluster (see `ClusterConfig`); needs `database.url`. */
  cluster: Schema.optional(Schema.NullOr(ClusterConfig))
})
export type GatewayConfig = typeof GatewayConfig.Type

/**
 * DeerFlow's `scheduler` section. Antler reads `enabled` (`false`: no scheduled task or cron ticks on its schedule,
 * as DeerFlow's poller is then not started; the routes still answer and a trigger still runs a task; unset: on, where
 * DeerFlow's default is off) and `min_once_delay_seconds` (how far ahead a `once` scheduled task must be when it is
 * made or moved, 1-86400, default 60, as DeerFlow's); its ticks come every `gateway.scheduler_poll_seconds`, so
 * `poll_interval_seconds` and the others are named among the ignored keys.
 */
export const SchedulerConfig = Schema.Struct({
  enabled: withDefault(Schema.Boolean, () => true),
  min_once_delay_seconds: withDefault(Schema.Int.pipe(Schema.between(1, 86_400)), () => 60)
})
export type SchedulerConfig = typeof SchedulerConfig.Type

/**
 * OpenTelemetry traces (Antler's own section): one trace per run, with model and tool calls as child spans,
 * exported over OTLP/HTTP. Off by default.
 */
export const TracingConfig = Schema.Struct({
  enabled: withDefault(Schema.Boolean, () => false),
  /** The OTLP/HTTP traces endpoint. */
  otlp_endpoint: withDefault(BaseUrl, () => "http://localhost:4318/v1/traces"),
  service_name: withDefault(Schema.NonEmptyTrimmedString, () => "antler"),
  /** `otlp` (to `otlp_endpoint`) or `console` (a line per span on stderr). */
  exporter: withDefault(Schema.Literal("otlp", "console"), () => "otlp" as const),
  /** Extra headers of the export requests (an API key...): secrets, never printed. */
  headers: withDefault(Schema.Record({ key: Schema.String, value: Schema.Redacted(Schema.String) }), () => ({}))
})
export type TracingConfig = typeof TracingConfig.Type
