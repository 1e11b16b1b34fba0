/**
 * The gateway's local accounts and their sessions, kept in a SQLite file of their own (`accounts.db` in the
 * data directory, whatever database the threads use), so that both survive a restart. An account is an Antler
 * user: its id (a UUID) is the user id its threads, memory and agents are kept under. A session is a random
 * token in the browser's HttpOnly `access_token` cookie, with a CSRF token of its own; only their SHA-256 digests
 * are stored, so the file gives neither away. Sessions end when they expire, at logout, and all of an account's
 * at a password change. An expired session's row is kept one more lifetime, so that its cookie reads as expired
 * (DeerFlow's `token_expired`) rather than unknown.
 */
import type { SqlError } from "@effect/sql/SqlError"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import * as Crypto from "node:crypto"
import * as Path from "node:path"
import * as SqliteConnection from "../../../layers/sqlite/SqliteConnection.js"

/** The file, in the data directory. */
export const FILENAME = "accounts.db"

/** An account as the API shows it (never its password hash). */
export interface Account {
  readonly id: string
  readonly email: string
  readonly system_role: "admin" | "user"
  readonly needs_setup: boolean
}

/** A session opened: the tokens for the browser's cookies. */
export interface OpenedSession {
  readonly token: string
  readonly csrf: string
}

/** What a session token opens: its account and the digest of its CSRF token, or that it has expired. */
export type SessionFound =
  | { readonly _tag: "open"; readonly account: Account; readonly csrfHash: string }
  | { readonly _tag: "expired" }

/** What signing in found: the account, with its password hash for the caller to verify. */
export interface Credentials {
  readonly account: Account
  readonly password_hash: string
}

const digest = (text: string) => Crypto.createHash("sha256").update(text).digest("hex")

const accountOf = (row: Record<string, unknown>): Account => ({
  id: String(row["id"]),
  email: String(row["email"]),
  system_role: row["system_role"] === "admin" ? "admin" : "user",
  needs_setup: row["needs_setup"] === 1
})

const SCHEMA = [
  `CREATE TABLE IF NOT EXISTS accounts (
    id TEXT PRIMARY KEY,
    email TEXT NOT NULL UNIQUE,
    password_hash TEXT NOT NULL,
    system_role TEXT NOT NULL CHECK (system_role IN ('admin', 'user')),
    needs_setup INTEGER NOT NULL DEFAULT 0,
    created_at INTEGER NOT NULL
  )`,
  `CREATE TABLE IF NOT EXISTS sessions (
    token_hash TEXT PRIMARY KEY,
    account_id TEXT NOT NULL,
    csrf_hash TEXT NOT NULL,
    expires_at INTEGER NOT NULL
  )`,
  "CREATE INDEX IF NOT EXISTS sessions_account ON sessions (account_id)"
]

/** Whether a failed statement broke a UNIQUE constraint (an email taken). */
const isUnique = (error: SqlError) => String((error.cause as { code?: unknown } | undefined)?.code).includes("UNIQUE")

/** The most sessions an account keeps open: a sign-in past them ends the oldest (DeerFlow's JWTs are not kept). */
export const MAX_SESSIONS_PER_ACCOUNT = 100

/** The store over `{home}/accounts.db` (created when missing); closed with the scope. */
export const open = (home: string, sessionDays: number) =>
  Effect.gen(function*() {
    const db = yield* SqliteConnection.open(Path.join(home, FILENAME))
    for (const statement of SCHEMA) yield* db.executeRaw(statement, [])
    const lifetimeMs = sessionDays * 24 * 3600 * 1000

    const byEmail = (email: string) =>
      Effect.map(
        db.execute("SELECT * FROM accounts WHERE email = ?", [email]),
        (rows) => Option.map(Option.fromNullable(rows[0]), (row) => ({
          account: accountOf(row),
          password_hash: String(row["password_hash"])
        }))
      )

    const byId = (id: string) =>
      Effect.map(
        db.execute("SELECT * FROM accounts WHERE id = ?", [id]),
        (rows) => Option.map(Option.fromNullable(rows[0]), accountOf)
      )

    /**
     * Makes an account; none when the email is taken, or (`firstAdmin`) when an admin exists already: the check
     * and the insert are one statement, so that two first admins cannot both be made.
     */
    const create = (email: string, passwordHash: string, role: "admin" | "user") =>
      Effect.gen(function*() {
        const id = Crypto.randomUUID()
        const now = yield* Clock.currentTimeMillis
        const guard = role === "admin" ? " WHERE NOT EXISTS (SELECT 1 FROM accounts WHERE system_role = 'admin')" : ""
        const result = yield* db.executeRaw(
          `INSERT INTO accounts (id, email, password_hash, system_role, needs_setup, created_at) ` +
            `SELECT ?, ?, ?, ?, 0, ?${guard}`,
          [id, email, passwordHash, role, now]
        ).pipe(
          Effect.map((r) => (r as SqliteConnection.RunResult).changes > 0 ? "made" as const : "admin_exists" as const),
          Effect.catchIf(isUnique, () => Effect.succeed("email_taken" as const))
        )
        return result === "made"
          ? { _tag: "made" as const, account: { id, email, system_role: role, needs_setup: false } }
          : { _tag: result }
      })

    const adminCount = Effect.map(
      db.execute("SELECT COUNT(*) AS n FROM accounts WHERE system_role = 'admin'", []),
      (rows) => Number(rows[0]?.["n"] ?? 0)
    )

    /** Opens a session of the account. */
    const openSession = (accountId: string) =>
      Effect.gen(function*() {
        const token = Crypto.randomBytes(32).toString("base64url")
        const csrf = Crypto.randomBytes(32).toString("base64url")
        const now = yield* Clock.currentTimeMillis
        // (sessions a lifetime past their end are forgotten as new ones open)
        yield* db.executeRaw("DELETE FROM sessions WHERE expires_at <= ?", [now - lifetimeMs])
        yield* db.executeRaw(
          "INSERT INTO sessions (token_hash, account_id, csrf_hash, expires_at) VALUES (?, ?, ?, ?)",
          [digest(token), accountId, digest(csrf), now + lifetimeMs]
        )
        // an account keeps its newest sessions only: signing in without end would fill the file
        yield* db.executeRaw(
          "DELETE FROM sessions WHERE account_id = ? AND rowid NOT IN " +
            "(SELECT rowid FROM sessions WHERE account_id = ? ORDER BY rowid DESC LIMIT ?)",
          [accountId, accountId, MAX_SESSIONS_PER_ACCOUNT]
        )
        return { token, csrf } satisfies OpenedSession
      })

    /** What a session token opens: its account while the session lasts, `expired` after; none when unknown. */
    const session = (token: string) =>
      Effect.gen(function*() {
        const now = yield* Clock.currentTimeMillis
        const rows = yield* db.execute(
          "SELECT a.*, s.csrf_hash, s.expires_at FROM sessions s JOIN accounts a ON a.id = s.account_id " +
            "WHERE s.token_hash = ?",
          [digest(token)]
        )
        return Option.map(Option.fromNullable(rows[0]), (row): SessionFound =>
          Number(row["expires_at"]) <= now
            ? { _tag: "expired" }
            : { _tag: "open", account: accountOf(row), csrfHash: String(row["csrf_hash"]) })
      })

    const closeSession = (token: string) =>
      Effect.asVoid(db.executeRaw("DELETE FROM sessions WHERE token_hash = ?", [digest(token)]))

    /** Sets the account's password (and email, when given), ending every session of it. */
    const update = (accountId: string, passwordHash: string, email: string | undefined) =>
      Effect.gen(function*() {
        const result = yield* db.executeRaw(
          "UPDATE accounts SET password_hash = ?, email = COALESCE(?, email), needs_setup = 0 WHERE id = ?",
          [passwordHash, email ?? null, accountId]
        ).pipe(
          Effect.as("updated" as const),
          Effect.catchIf(isUnique, () => Effect.succeed("email_taken" as const))
        )
        if (result === "updated") yield* db.executeRaw("DELETE FROM sessions WHERE account_id = ?", [accountId])
        return result
      })

    return { byEmail, byId, create, adminCount, openSession, session, closeSession, update }
  })

/** The account store. */
export type AccountStore = Effect.Effect.Success<ReturnType<typeof open>>

/** What opening the store needs and may fail with. */
export type Opening = Effect.Effect<AccountStore, SqlError, Scope.Scope>

/** Whether `text` is the CSRF token whose digest is `csrfHash` (compared in constant time). */
export const csrfMatches = (text: string, csrfHash: string): boolean => {
  const given = Buffer.from(digest(text), "hex")
  const expected = Buffer.from(csrfHash, "hex")
  return given.length === expected.length && Crypto.timingSafeEqual(given, expected)
}
