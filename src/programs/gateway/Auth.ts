/**
 * Who is asking: API tokens (`gateway.auth.tokens`, each standing for a user id) read from `Authorization:
 * Bearer <token>` or `X-Api-Key` (what the LangGraph SDK sends). Without tokens the gateway is open and every
 * request is user `default` (the CLI's user), which is allowed only on a loopback address: bound anywhere else
 * it refuses to start. Tokens are compared in constant time and never printed.
 *
 * What a gateway user owns, and what no run of theirs may change:
 *
 * - Owned (created, read, changed and deleted by that user only; another user's answers 404, as if it did not
 *   exist): their threads (stored under an id of their own, so that two users may use the same thread id; see
 *   `ThreadIds.ts`), the runs, checkpoints, uploads and artifacts of those threads (under
 *   `{home}/users/{user}/threads/`), their long-term memory (`{home}/users/{user}/memory.json`, and per agent
 *   under `{home}/users/{user}/agents/{name}/`) and their custom agents (`{home}/users/{user}/agents/{name}/`:
 *   `config.yaml`, `SOUL.md`), written by the bootstrap agent's `setup_agent` and by `update_agent`. A run
 *   names an agent (`agent_name`, `assistant_id`) of its own user only: another user's agent is an agent that
 *   does not exist.
 * - Shared, read by every user's agent, and never written through a run of a non-admin token: the default
 *   agent's soul (`{home}/SOUL.md`), `config.yaml`, `extensions_config.json`, the skills directory, and the old
 *   shared agents (`{home}/agents/{name}/`, read-only for everyone: DeerFlow's layout before per-user agents).
 *   Only two tools could write one of them: `setup_agent` (the default agent's soul, in a bootstrap run without
 *   `agent_name`): the gateway refuses such a run with 400 unless its token has `admin: true`, and the tool
 *   itself refuses unless the run is an admin's (`RunOptions.admin`); and `skill_manage` (the skills' `custom/`
 *   folder, with `skill_evolution`), offered only to an admin's run and refusing in any other. The CLI's runs are its
 *   local user's, who owns the data directory, and count as an admin's; an open gateway's (no tokens) do not, since
 *   anything that can reach its port (another local account, a page in a browser) makes them.
 */
import * as Either from "effect/Either"
import * as Redacted from "effect/Redacted"
import * as Crypto from "node:crypto"
import * as Net from "node:net"
import type { GatewayToken } from "../../services/AppConfig.js"

/** The user of an open (token-less) gateway: the CLI's. */
export const DEFAULT_USER = "default"

/** Whether a host name or address is loopback only (`127.0.0.0/8`, `::1`, `localhost`). */
export const isLoopback = (host: string): boolean => {
  const bare = host.replace(/^\[|\]$/g, "").toLowerCase()
  if (bare === "localhost") return true
  if (Net.isIPv4(bare)) return bare.startsWith("127.")
  if (Net.isIPv6(bare)) return bare === "::1" || /^::ffff:127\./.test(bare)
  return false
}

/** Why the gateway must not start on `host` with these tokens, if it must not. */
export const bindProblem = (
  host: string,
  tokens: ReadonlyArray<GatewayToken>,
  accounts = false
): string | undefined => {
  if (tokens.length > 0 || accounts || isLoopback(host)) return undefined
  return `refusing to serve on ${host} without API tokens: anyone who can reach it could run the agent. ` +
    "Configure gateway.auth.tokens in config.yaml (- token: $ANTLER_TOKEN_ALICE, user: alice) or " +
    "gateway.auth.accounts: true, or bind to 127.0.0.1 (--host 127.0.0.1)."
}

/** Why the gateway must not answer browsers of every origin with these tokens, if it must not. */
export const corsProblem = (
  origins: ReadonlyArray<string>,
  tokens: ReadonlyArray<GatewayToken>,
  accounts = false
): string | undefined => {
  if (tokens.length > 0 || accounts || !origins.includes("*")) return undefined
  return "refusing gateway.cors.allow_origins \"*\" without API tokens: every web page you visit could run the " +
    "agent and read your threads. List the origins of your pages instead, or configure gateway.auth.tokens."
}

/**
 * Why two tokens cannot be used together, if they cannot: the same token for two users, or listed twice, with
 * `admin: true` and without.
 */
export const tokensProblem = (tokens: ReadonlyArray<GatewayToken>): string | undefined => {
  const seen = new Map<string, GatewayToken>()
  for (const entry of tokens) {
    const value = Redacted.value(entry.token)
    const other = seen.get(value)
    if (other !== undefined && other.user !== entry.user) {
      return `gateway.auth.tokens: one token is given to two users (${other.user} and ${entry.user})`
    }
    if (other !== undefined && other.admin !== entry.admin) {
      return `gateway.auth.tokens: one token of ${entry.user} is listed twice, once with admin: true and once without`
    }
    if (other !== undefined && other.role !== entry.role) {
      return `gateway.auth.tokens: one token of ${entry.user} is listed twice, with two roles`
    }
    seen.set(value, entry)
  }
  return undefined
}

const digest = (text: string) => Crypto.createHash("sha256").update(text).digest()

/** The token a request carries (`Authorization: Bearer`, else `X-Api-Key`), if any. */
export const tokenOf = (headers: Readonly<Record<string, string | undefined>>): string | undefined => {
  const authorization = headers["authorization"]
  if (authorization !== undefined) {
    const match = /^Bearer\s+(\S+)\s*$/i.exec(authorization)
    if (match !== null) return match[1]
  }
  const key = headers["x-api-key"]
  return key !== undefined && key.trim() !== "" ? key.trim() : undefined
}

/** Who a request is: its user, and whether its token is an admin's (see the top of this module). */
export interface Identity {
  readonly user: string
  readonly admin: boolean
  /**
   * The user's role for `authorization`: a token's `role` (default `admin` for an admin token, else `user`), an
   * account's `system_role`; none on an open gateway (the configured `default_role` applies).
   */
  readonly role?: string | undefined
  /** The account, when the request is a signed-in account's (`gateway.auth.accounts`); its id is `user`. */
  readonly account?: {
    readonly id: string
    readonly email: string
    readonly system_role: "admin" | "user"
    readonly needs_setup: boolean
  }
}

/** Resolves requests to users. */
export interface Authenticator {
  /** Whether requests need a token. */
  readonly required: boolean
  /** Who a request's headers stand for, or why not. */
  readonly identify: (headers: Readonly<Record<string, string | undefined>>) => Either.Either<Identity, string>
}

/** An authenticator over the configured tokens. */
export const make = (tokens: ReadonlyArray<GatewayToken>): Authenticator => {
  const entries = tokens.map((t) => ({
    hash: digest(Redacted.value(t.token)),
    user: t.user,
    admin: t.admin,
    role: t.role ?? (t.admin ? "admin" : "user")
  }))
  return {
    required: entries.length > 0,
    identify: (headers) => {
      // an open gateway's requests are the CLI's user's, but not an admin's (see the top of this module)
      if (entries.length === 0) return Either.right({ user: DEFAULT_USER, admin: false })
      const token = tokenOf(headers)
      if (token === undefined) {
        return Either.left("This gateway needs an API token: send `Authorization: Bearer <token>` (or `X-Api-Key`).")
      }
      const hash = digest(token)
      // every entry is compared, so the time taken says nothing about which one matched
      let found: Identity | undefined
      for (const entry of entries) {
        const { admin, role, user } = entry
        if (Crypto.timingSafeEqual(entry.hash, hash)) found ??= { user, admin, role }
      }
      return found === undefined ? Either.left("The API token is not valid.") : Either.right(found)
    }
  }
}
