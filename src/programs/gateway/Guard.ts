/**
 * Which requests the gateway answers at all, before any route: a web page in the user's browser must not be able
 * to drive it. Two checks, with or without API tokens:
 *
 * - The `Host` must name the gateway: the address it is bound to with its port (bound to loopback, any loopback
 *   spelling: `127.0.0.1`, `localhost`, `[::1]`), or a name of `gateway.allowed_hosts`. A page on a name of the
 *   attacker's that resolves to 127.0.0.1 (DNS rebinding) is same-origin with what it reaches, so only the
 *   `Host` it sends tells it from the gateway's own page; refused, it reads nothing.
 * - A state-changing request (POST, PUT, PATCH, DELETE) from a browser must come from the gateway's own page or
 *   an origin of `gateway.cors.allow_origins` (`"*"`: any page's request that sends an API token). Browsers send
 *   `Origin` with every such request; without one, a `Sec-Fetch-Site` of `cross-site` or `same-site` still gives
 *   another page away. `Origin: null` (a sandboxed
 *   frame, such as an artifact's, a local file, a redirect) cannot be told from any other page and is refused, as
 *   is one with more than `scheme://host[:port]` (a path), which no browser sends.
 *   Clients that are not browsers (the SDK, curl) send neither header and are not concerned.
 */
import * as HttpMiddleware from "@effect/platform/HttpMiddleware"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as Effect from "effect/Effect"
import * as Net from "node:net"
import * as Os from "node:os"
import { problem } from "./api/Problem.js"
import { isLoopback } from "./Auth.js"

/** Where the gateway listens, and whom it answers. */
export interface Options {
  /** The host it is bound to (`gateway.host` or `--host`). */
  readonly host: string
  /** The port it listens on (the one chosen, when asked for any). */
  readonly port: number
  /** `gateway.allowed_hosts`: more names (or addresses) it answers to, each with a port or on any port. */
  readonly allowedHosts: ReadonlyArray<string>
  /** `gateway.cors.allow_origins`. */
  readonly allowOrigins: ReadonlyArray<string>
}

/** A `Host` header (or an `allowed_hosts` entry) read: the name in lower case, brackets off, and the port. */
export interface HostName {
  readonly name: string
  readonly port: number | undefined
}

/** Reads `name`, `name:port`, `[v6]` or `[v6]:port`; undefined when it is none of those. */
export const parseHost = (value: string): HostName | undefined => {
  const match = /^(?:\[([0-9A-Fa-f:.]+)\]|([A-Za-z0-9_.-]+))(?::(\d{1,5}))?$/.exec(value.trim())
  if (match === null) return undefined
  const name = (match[1] ?? match[2]!).toLowerCase()
  if (match[1] !== undefined && !Net.isIPv6(name)) return undefined
  const port = match[3] === undefined ? undefined : Number(match[3])
  if (port !== undefined && port > 65535) return undefined
  return { name, port }
}

const WILDCARDS: ReadonlySet<string> = new Set(["0.0.0.0", "::", "[::]", ""])

/** The addresses of this machine's interfaces, in lower case (for a gateway bound to all of them). */
const localAddresses = (): ReadonlySet<string> =>
  new Set(Object.values(Os.networkInterfaces()).flatMap((list) => (list ?? []).map((i) => i.address.toLowerCase())))

/** Why the gateway does not answer a request with this `Host` header, if it does not. */
export const hostProblem = (header: string | undefined, options: Options): string | undefined => {
  if (header === undefined || header.trim() === "") return "The request has no Host header."
  const host = parseHost(header)
  if (host === undefined) return `The Host header ${JSON.stringify(header)} is not a host name with an optional port.`
  for (const entry of options.allowedHosts) {
    const allowed = parseHost(entry)
    const matches = allowed !== undefined && allowed.name === host.name
    if (matches && (allowed.port === undefined || allowed.port === host.port)) return undefined
  }
  const bound = options.host.replace(/^\[|\]$/g, "").toLowerCase()
  const port = host.port ?? 80
  const named = host.name === bound ||
    (isLoopback(bound) && isLoopback(host.name)) ||
    (WILDCARDS.has(bound) && (isLoopback(host.name) || localAddresses().has(host.name)))
  if (named && port === options.port) return undefined
  const serves = WILDCARDS.has(bound)
    ? "this machine's addresses"
    : isLoopback(bound)
    ? "loopback (127.0.0.1, localhost, [::1])"
    : bound
  return `This gateway does not answer to the host ${JSON.stringify(header)}: it serves ${serves} on port ` +
    `${options.port}. A name it should answer to (behind a proxy, say) goes in gateway.allowed_hosts.`
}

const STATE_CHANGING: ReadonlySet<string> = new Set(["POST", "PUT", "PATCH", "DELETE"])

/** An origin as CORS compares it (`scheme://host[:port]`), or the text as it is when it is no URL. */
export const normalizeOrigin = (origin: string): string => {
  try {
    const url = new URL(origin)
    return url.origin === "null" ? origin : url.origin
  } catch {
    return origin
  }
}

const defaultPort = (protocol: string) => (protocol === "https:" ? 443 : 80)

/** Whether a page of `origin` is the gateway's own (the origin names the host the request was sent to). */
const isOwnOrigin = (origin: string, hostHeader: string | undefined): boolean => {
  if (hostHeader === undefined) return false
  const host = parseHost(hostHeader)
  let url: URL
  try {
    url = new URL(origin)
  } catch {
    return false
  }
  if (host === undefined || (url.protocol !== "http:" && url.protocol !== "https:")) return false
  const name = url.hostname.replace(/^\[|\]$/g, "").toLowerCase()
  const port = url.port === "" ? defaultPort(url.protocol) : Number(url.port)
  return name === host.name && port === (host.port ?? defaultPort(url.protocol))
}

/**
 * Whether the request sends an API token (`Authorization` or `X-API-Key`), which no form a page submits can: a
 * page that has one is a client of the API, where a page without one could only drive the routes that need none
 * (signing in as the attacker's account, making the first admin with a password of its own).
 */
const carriesToken = (headers: Readonly<Record<string, string | undefined>>): boolean =>
  (headers["authorization"] ?? "").trim() !== "" || (headers["x-api-key"] ?? "").trim() !== ""

// an Origin as browsers send it: a scheme, "://" and a host with an optional port; no path, query or user
const SERIALIZED_ORIGIN = /^[A-Za-z][A-Za-z0-9+.-]*:\/\/[^/?#@\\\s]+$/

/**
 * Why a request may not change anything, judged by where a browser says it comes from, if it may not. An
 * origin `gateway.cors.allow_origins` lists may; `"*"` admits any origin's requests that send an API token only.
 */
export const originProblem = (
  method: string,
  headers: Readonly<Record<string, string | undefined>>,
  options: Pick<Options, "allowOrigins">
): string | undefined => {
  if (!STATE_CHANGING.has(method.toUpperCase())) return undefined
  const origin = headers["origin"]
  if (origin === undefined) {
    const site = headers["sec-fetch-site"]
    return site === "cross-site" || site === "same-site"
      ? `A ${method} from another site's page (Sec-Fetch-Site: ${site}) is refused.`
      : undefined
  }
  if (origin.trim() === "null") {
    return `A ${method} from Origin null (a sandboxed frame, a local file or a redirect) is refused: its page ` +
      "cannot be told from any other."
  }
  if (!SERIALIZED_ORIGIN.test(origin.trim())) {
    return `A ${method} with Origin ${JSON.stringify(origin)} is refused: an origin is scheme://host[:port], ` +
      "nothing after it (a browser sends no other)."
  }
  if (options.allowOrigins.includes(normalizeOrigin(origin))) return undefined
  if (isOwnOrigin(origin, headers["host"])) return undefined
  if (options.allowOrigins.includes("*")) {
    if (carriesToken(headers)) return undefined
    return `A ${method} without an API token from a page of ${JSON.stringify(origin)} is refused: allow_origins ` +
      "\"*\" admits pages that send a token; signing in, signing up and making the first admin are for the " +
      "gateway's own page and the origins gateway.cors.allow_origins lists."
  }
  return `A ${method} from a page of ${JSON.stringify(origin)} is refused: only the gateway's own page and the ` +
    "origins of gateway.cors.allow_origins may change anything here."
}

/** The checks as a middleware: a refused request gets a JSON problem (400, 403) and reaches no route. */
export const middleware = (options: Options) =>
  HttpMiddleware.make((app) =>
    Effect.gen(function*() {
      const request = yield* HttpServerRequest.HttpServerRequest
      const host = request.headers["host"]
      const wrongHost = hostProblem(host, options)
      if (wrongHost !== undefined) {
        return problem(host === undefined || parseHost(host) === undefined ? 400 : 403, wrongHost)
      }
      const wrongOrigin = originProblem(request.method, request.headers, options)
      if (wrongOrigin !== undefined) return problem(403, wrongOrigin)
      return yield* app
    })
  )
