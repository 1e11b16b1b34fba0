/**
 * OAuth for an MCP server over HTTP or SSE (DeerFlow's `mcp/oauth.py`; the entry's `oauth`, `McpOAuth`): an access
 * token taken from the token endpoint with the `client_credentials` or `refresh_token` grant, kept until
 * `refresh_skew_seconds` before it expires, and sent as the `Authorization` header of each of the server's
 * requests. Calls that need a token while one is being fetched wait for that one request. A rotated refresh token
 * replaces the configured one in memory (never in the file). What the endpoint answers is bounded and checked;
 * a failure says what went wrong without the secrets it was sent.
 */
import type { FetchLike } from "@modelcontextprotocol/sdk/shared/transport.js"
import type { McpOAuth } from "../../services/Extensions.js"

/** How long a token request may take (DeerFlow's 15 s). */
export const TOKEN_TIMEOUT_MS = 15_000

/** The largest token response read. */
export const MAX_TOKEN_RESPONSE_BYTES = 64 * 1024

/** The expiry assumed when the endpoint gives none (or none that is a number): one hour, as DeerFlow. */
const DEFAULT_EXPIRES_IN = 3600

/** A server's tokens. */
export interface TokenSource {
  /** The `Authorization` header's value: the kept token, or a new one when there is none or it is about to expire. */
  readonly authorization: () => Promise<string>
}

/** The token endpoint for messages: without its query, which may carry credentials. */
const endpointOf = (tokenUrl: string): string => {
  try {
    const url = new URL(tokenUrl)
    return `${url.origin}${url.pathname}`
  } catch {
    return "(invalid URL)"
  }
}

const causeOf = (error: unknown): string => {
  const cause = (error as { cause?: { code?: unknown; message?: unknown } } | null)?.cause
  if (typeof cause?.code === "string") return cause.code
  if (error instanceof Error && error.name === "TimeoutError") return `no answer within ${TOKEN_TIMEOUT_MS / 1000} s`
  return error instanceof Error ? error.message : String(error)
}

/** A response's body as text, at most `MAX_TOKEN_RESPONSE_BYTES` (more fails). */
const boundedText = async (response: Response): Promise<string> => {
  const reader = response.body?.getReader()
  if (reader === undefined) return ""
  const chunks: Array<Uint8Array> = []
  let size = 0
  for (;;) {
    const { done, value } = await reader.read()
    if (done) break
    size += value.byteLength
    if (size > MAX_TOKEN_RESPONSE_BYTES) {
      await reader.cancel().catch(() => undefined)
      throw new Error(`its answer is larger than ${MAX_TOKEN_RESPONSE_BYTES} bytes`)
    }
    chunks.push(value)
  }
  return Buffer.concat(chunks).toString("utf8")
}

/** Seconds until expiry as DeerFlow reads them: an integer or integer text, else an hour; at least one. */
const expiresInOf = (raw: unknown): number => {
  const seconds = typeof raw === "number" && Number.isFinite(raw)
    ? Math.trunc(raw)
    : typeof raw === "string" && /^\s*[+-]?\d+\s*$/.test(raw)
    ? Number.parseInt(raw, 10)
    : DEFAULT_EXPIRES_IN
  return Math.max(seconds, 1)
}

/** The form a token request sends (the grant's fields over `extra_token_params`, which cannot replace them). */
export const tokenForm = (oauth: McpOAuth, refreshToken: string | undefined): URLSearchParams => {
  const form = new URLSearchParams(oauth.extra_token_params)
  form.set("grant_type", oauth.grant_type)
  const put = (key: string, value: string | null | undefined) => {
    if (value !== undefined && value !== null && value !== "") form.set(key, value)
  }
  put("scope", oauth.scope)
  put("audience", oauth.audience)
  if (oauth.grant_type === "refresh_token") put("refresh_token", refreshToken)
  put("client_id", oauth.client_id)
  put("client_secret", oauth.client_secret)
  return form
}

/** The tokens of one server. */
export const tokenSource = (
  oauth: McpOAuth,
  options: { readonly now?: () => number; readonly fetch?: typeof fetch } = {}
): TokenSource => {
  const now = options.now ?? Date.now
  const post = options.fetch ?? fetch
  const endpoint = endpointOf(oauth.token_url)
  let refreshToken = oauth.refresh_token ?? undefined
  let kept: { readonly header: string; readonly expiresAt: number } | undefined
  let pending: Promise<string> | undefined

  const failure = (why: string) => new Error(`the OAuth token request to ${endpoint} failed: ${why}`)

  const request = async (): Promise<string> => {
    let response: Response
    try {
      response = await post(oauth.token_url, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded", accept: "application/json" },
        body: tokenForm(oauth, refreshToken),
        redirect: "error",
        signal: AbortSignal.timeout(TOKEN_TIMEOUT_MS)
      })
    } catch (error) {
      throw failure(causeOf(error))
    }
    let text: string
    try {
      text = await boundedText(response)
    } catch (error) {
      throw failure(causeOf(error))
    }
    if (!response.ok) throw failure(`HTTP ${response.status}`)
    let payload: unknown
    try {
      payload = JSON.parse(text)
    } catch {
      throw failure("its answer is not JSON")
    }
    const fields = typeof payload === "object" && payload !== null && !Array.isArray(payload)
      ? payload as Record<string, unknown>
      : {}
    const access = fields[oauth.token_field]
    if (typeof access !== "string" || access === "") throw failure(`its answer has no '${oauth.token_field}'`)
    const rotated = fields.refresh_token
    if (oauth.grant_type === "refresh_token" && typeof rotated === "string" && rotated !== "") refreshToken = rotated
    const givenType = fields[oauth.token_type_field]
    const type = typeof givenType === "string" && givenType !== "" ? givenType : oauth.default_token_type
    kept = { header: `${type} ${access}`, expiresAt: now() + expiresInOf(fields[oauth.expires_in_field]) * 1000 }
    return kept.header
  }

  return {
    authorization: () => {
      if (kept !== undefined && kept.expiresAt > now() + Math.max(oauth.refresh_skew_seconds, 0) * 1000) {
        return Promise.resolve(kept.header)
      }
      pending ??= request().finally(() => {
        pending = undefined
      })
      return pending
    }
  }
}

/** `base` with the source's `Authorization` header on every request (over any other given). */
export const authorizedFetch = (source: TokenSource, base: FetchLike = fetch): FetchLike => async (input, init) => {
  const headers = new Headers(init?.headers)
  headers.set("Authorization", await source.authorization())
  return base(input, { ...init, headers })
}
