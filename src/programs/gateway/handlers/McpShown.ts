/**
 * An MCP server of `extensions_config.json` as DeerFlow's settings page is shown it and sends it back: its fields
 * with DeerFlow's defaults, every value that may be a secret masked (env and header values, URL passwords and
 * secret-like query parameters, every key named like a secret; OAuth's client secret and refresh token null), and
 * a `"***"` sent back replaced by the stored value (a new key given `"***"` is refused).
 */
import * as Either from "effect/Either"
import * as Schema from "effect/Schema"
import { McpServerConfig, transportOf } from "../../../services/Extensions.js"
import * as ExtensionsApi from "../api/Extensions.js"
import { fail, type GatewayError } from "../api/Problem.js"

/** A JSON object as the file holds it. */
export type Raw = Record<string, unknown>

const { MASKED } = ExtensionsApi

/** Whether a value is a JSON object. */
export const isRecord = (value: unknown): value is Raw =>
  typeof value === "object" && value !== null && !Array.isArray(value)

const SECRET_KEY = new RegExp(
  "(^|_)(api_key|apikey|access_key|private_key|client_secret|secret|token|password|passwd|credential|credentials|" +
    "authorization|bearer)(_|$)"
)

/** Whether a key names a secret (`apiKey`, `X-Auth-Token`, `client_secret`...). */
export const isSecretKey = (key: string): boolean =>
  SECRET_KEY.test(
    key.replace(/(.)([A-Z][a-z]+)/g, "$1_$2").replace(/([a-z0-9])([A-Z])/g, "$1_$2").toLowerCase()
      .replace(/[^a-z0-9]+/g, "_").replace(/^_+|_+$/g, "")
  )

/** A URL with its password and secret-like query parameters masked (not a URL: as it is). */
const maskUrl = (text: string): string => {
  try {
    const url = new URL(text)
    let changed = false
    if (url.password !== "") {
      url.password = MASKED
      changed = true
    }
    for (const key of [...url.searchParams.keys()]) {
      if (isSecretKey(key)) {
        url.searchParams.set(key, MASKED)
        changed = true
      }
    }
    return changed ? url.toString() : text
  } catch {
    return text
  }
}

/** A value with every secret-named key's value masked, at any depth. */
export const maskDeep = (value: unknown): unknown => {
  if (Array.isArray(value)) return value.map(maskDeep)
  if (!isRecord(value)) return value
  const out: Raw = {}
  for (const [key, item] of Object.entries(value)) out[key] = isSecretKey(key) ? MASKED : maskDeep(item)
  return out
}

const maskValues = (value: unknown): unknown =>
  isRecord(value) ? Object.fromEntries(Object.keys(value).map((key) => [key, MASKED])) : value

/** OAuth fields whose names look secret but are not (`token_field: access_token`). */
const OAUTH_PLAIN = ["token_field", "token_type_field", "expires_in_field", "default_token_type"]

/**
 * A server's OAuth as DeerFlow shows it: its client secret and refresh token null (they stay on the server: a null
 * sent back keeps them); the token URL's secrets, the values of `extra_token_params` (an assertion may be one) and
 * any secret-named extra masked; the rest as it is.
 */
const shownOAuth = (oauth: Raw): Raw => {
  const shown = maskDeep(oauth) as Raw
  for (const key of OAUTH_PLAIN) if (key in oauth) shown[key] = oauth[key]
  if (typeof oauth.token_url === "string") shown.token_url = maskUrl(oauth.token_url)
  if ("extra_token_params" in oauth) shown.extra_token_params = maskValues(oauth.extra_token_params)
  shown.client_secret = null
  shown.refresh_token = null
  return shown
}

/** DeerFlow's round trip of OAuth's secrets: null (as shown) or absent keeps the stored one, "" removes it. */
export const restoreOAuthSecrets = (incoming: unknown, existing: unknown): unknown => {
  if (!isRecord(incoming)) return incoming
  const stored = isRecord(existing) ? existing : {}
  const out: Raw = { ...incoming }
  for (const key of ["client_secret", "refresh_token"]) {
    const given = incoming[key]
    if (given === "" || ((given === null || given === undefined) && typeof stored[key] !== "string")) delete out[key]
    else if (given === null || given === undefined) out[key] = stored[key]
  }
  return out
}

/**
 * What DeerFlow's `McpServerConfigResponse` shows for a field a server leaves unset (the others' defaults are the
 * Schema's): the bring-up timeout is the one the client uses (60 s, as DeerFlow's), routing is off.
 */
const UNSET: Raw = {
  command: null,
  url: null,
  oauth: null,
  routing: { mode: "off", priority: 0, keywords: [] },
  tool_call_timeout: null,
  session_init_timeout: 60,
  task_toolsets: []
}

/** A server's entry as it is shown: DeerFlow's fields with their defaults, every secret masked. */
export const shownServer = (raw: Raw): Raw => {
  const decoded = Schema.decodeUnknownEither(McpServerConfig)(raw)
  const full: Raw = Either.isRight(decoded) ? { ...UNSET, ...decoded.right, type: transportOf(decoded.right) } : raw
  delete full.transport
  const shown = maskDeep(full) as Raw
  if ("env" in full) shown.env = maskValues(full.env)
  if ("headers" in full) shown.headers = maskValues(full.headers)
  if (typeof full.url === "string") shown.url = maskUrl(full.url)
  if (isRecord(full.oauth)) shown.oauth = shownOAuth(full.oauth)
  return shown
}

/**
 * The value sent back with its masks replaced by what is stored (`existing`); a mask with nothing stored is
 * refused. A URL sent back as shown (masked) is the stored one.
 */
export const unmask = (incoming: unknown, existing: unknown, where: string): Either.Either<unknown, GatewayError> => {
  if (incoming === MASKED) {
    return existing === undefined || existing === MASKED
      ? Either.left(fail("bad_request", `Cannot set ${where} to the masked value '${MASKED}'; provide a real value.`))
      : Either.right(existing)
  }
  if (typeof incoming === "string" && typeof existing === "string" && incoming !== existing) {
    return Either.right(incoming === maskUrl(existing) ? existing : incoming)
  }
  if (Array.isArray(incoming)) {
    const out: Array<unknown> = []
    for (const [index, item] of incoming.entries()) {
      const restored = unmask(item, Array.isArray(existing) ? existing[index] : undefined, `${where}[${index}]`)
      if (Either.isLeft(restored)) return restored
      out.push(restored.right)
    }
    return Either.right(out)
  }
  if (isRecord(incoming)) {
    const out: Raw = {}
    for (const [key, item] of Object.entries(incoming)) {
      const restored = unmask(item, isRecord(existing) ? existing[key] : undefined, `${where}.${key}`)
      if (Either.isLeft(restored)) return restored
      out[key] = restored.right
    }
    return Either.right(out)
  }
  return Either.right(incoming)
}
