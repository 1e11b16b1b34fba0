/**
 * Who is asking: API tokens (`gateway.auth.tokens`, each standing for a user id) read from `Authorization:
 * Bearer <token>` or `X-Api-Key` (what the LangGraph SDK sends). Without tokens the gateway is open and every
 * request is user `default` (the CLI's user), which is allowed only on a loopback address: bound anywhere else
 * it refuses to start. Tokens are compared in constant time and never printed.
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
export const bindProblem = (host: string, tokens: ReadonlyArray<GatewayToken>): string | undefined => {
  if (tokens.length > 0 || isLoopback(host)) return undefined
  return `refusing to serve on ${host} without API tokens: anyone who can reach it could run the agent. ` +
    "Configure gateway.auth.tokens in config.yaml (- token: $ANTLER_TOKEN_ALICE, user: alice), " +
    "or bind to 127.0.0.1 (--host 127.0.0.1)."
}

/** Why the gateway must not answer browsers of every origin with these tokens, if it must not. */
export const corsProblem = (
  origins: ReadonlyArray<string>,
  tokens: ReadonlyArray<GatewayToken>
): string | undefined => {
  if (tokens.length > 0 || !origins.includes("*")) return undefined
  return "refusing gateway.cors.allow_origins \"*\" without API tokens: every web page you visit could run the " +
    "agent and read your threads. List the origins of your pages instead, or configure gateway.auth.tokens."
}

/** Why two tokens cannot be used together, if they cannot (the same token for two users). */
export const tokensProblem = (tokens: ReadonlyArray<GatewayToken>): string | undefined => {
  const seen = new Map<string, string>()
  for (const entry of tokens) {
    const value = Redacted.value(entry.token)
    const other = seen.get(value)
    if (other !== undefined && other !== entry.user) {
      return `gateway.auth.tokens: one token is given to two users (${other} and ${entry.user})`
    }
    seen.set(value, entry.user)
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

/** Resolves requests to users. */
export interface Authenticator {
  /** Whether requests need a token. */
  readonly required: boolean
  /** The user a request's headers stand for, or why not. */
  readonly user: (headers: Readonly<Record<string, string | undefined>>) => Either.Either<string, string>
}

/** An authenticator over the configured tokens. */
export const make = (tokens: ReadonlyArray<GatewayToken>): Authenticator => {
  const entries = tokens.map((t) => ({ hash: digest(Redacted.value(t.token)), user: t.user }))
  return {
    required: entries.length > 0,
    user: (headers) => {
      if (entries.length === 0) return Either.right(DEFAULT_USER)
      const token = tokenOf(headers)
      if (token === undefined) {
        return Either.left("This gateway needs an API token: send `Authorization: Bearer <token>` (or `X-Api-Key`).")
      }
      const hash = digest(token)
      // every entry is compared, so the time taken says nothing about which one matched
      let user: string | undefined
      for (const entry of entries) if (Crypto.timingSafeEqual(entry.hash, hash)) user ??= entry.user
      return user === undefined ? Either.left("The API token is not valid.") : Either.right(user)
    }
  }
}
