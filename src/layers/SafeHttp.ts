/**
 * HTTP for tools that reach the web: a whole-request deadline, a cap on the bytes read (after decompression),
 * a bounded number of redirects, and an address policy checked on the address a connection really goes to.
 *
 * The policy is enforced at connection time, not on the URL's text: an IP literal is checked as is, a host name
 * is resolved once by our own `lookup` and every address it resolves to is checked before the socket connects
 * to one of them (so a name that resolves to a private address, or that changes its answer between a check and
 * the connection, cannot reach the inside). Every redirect hop goes through the same check. Private, loopback,
 * link-local, CGNAT, multicast and reserved addresses are refused unless the policy allows them (all of them,
 * or listed ranges).
 */
import * as Dns from "node:dns"
import * as Http from "node:http"
import * as Https from "node:https"
import * as Net from "node:net"
import type { Readable } from "node:stream"
import * as Zlib from "node:zlib"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"

// ---------------------------------------------------------------------------------------------------------
// The address policy (pure)

/** Which addresses a request may connect to: any, public only, or public plus the listed ranges. */
export type AddressPolicy =
  | { readonly _tag: "any" }
  | { readonly _tag: "public"; readonly allow?: ReadonlyArray<string> | undefined }

/** Every address is allowed (endpoints an operator configured, such as a search provider). */
export const anyAddress: AddressPolicy = { _tag: "any" }

/** Public addresses only, plus `allow` (CIDR ranges or single addresses, e.g. `10.0.0.0/8`, `127.0.0.1`). */
export const publicOnly = (allow?: ReadonlyArray<string>): AddressPolicy => ({ _tag: "public", allow })

const RANGES: ReadonlyArray<readonly [string, number, "ipv4" | "ipv6", string]> = [
  ["0.0.0.0", 8, "ipv4", "an unspecified (\"this network\") address"],
  ["10.0.0.0", 8, "ipv4", "a private address"],
  ["100.64.0.0", 10, "ipv4", "a shared (CGNAT) address"],
  ["127.0.0.0", 8, "ipv4", "a loopback address"],
  ["169.254.0.0", 16, "ipv4", "a link-local address (cloud metadata lives here)"],
  ["172.16.0.0", 12, "ipv4", "a private address"],
  ["192.0.0.0", 24, "ipv4", "a reserved address"],
  ["192.0.2.0", 24, "ipv4", "a documentation address"],
  ["192.168.0.0", 16, "ipv4", "a private address"],
  ["198.18.0.0", 15, "ipv4", "a benchmarking address"],
  ["198.51.100.0", 24, "ipv4", "a documentation address"],
  ["203.0.113.0", 24, "ipv4", "a documentation address"],
  ["224.0.0.0", 4, "ipv4", "a multicast address"],
  ["240.0.0.0", 4, "ipv4", "a reserved address"],
  ["::", 128, "ipv6", "an unspecified address"],
  ["::1", 128, "ipv6", "a loopback address"],
  ["fc00::", 7, "ipv6", "a private (unique local) address"],
  ["fe80::", 10, "ipv6", "a link-local address"],
  ["fec0::", 10, "ipv6", "a site-local address"],
  ["ff00::", 8, "ipv6", "a multicast address"],
  ["2001:db8::", 32, "ipv6", "a documentation address"],
  // RFC 8215: translated inside one operator's network, to addresses it chooses, placed as its prefix length says
  ["64:ff9b:1::", 48, "ipv6", "a local-use NAT64 address (it may reach any IPv4 address of its network)"]
]

/**
 * The IPv4 addresses an IPv6 address carries, each of which its packets may end up at: IPv4-compatible
 * `::a.b.c.d`, IPv4-mapped `::ffff:a.b.c.d`, IPv4-translated `::ffff:0:a.b.c.d`, NAT64 `64:ff9b::/96`, 6to4
 * `2002::/16` (bits 16-48) and Teredo `2001::/32` (its server, bits 32-64, and its client, the last 32 bits
 * inverted). Empty for any other address. (`::` and `::1` are IPv6's own unspecified and loopback addresses.)
 */
export const embeddedIpv4 = (address: string): ReadonlyArray<string> => {
  const words = expandIpv6(address.toLowerCase())
  if (words === undefined) return []
  const v4 = (hi: number, lo: number) => `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`
  const zero = (from: number, to: number) => words.slice(from, to).every((w) => w === 0)
  const [w0, w1, w2, w3, w4, w5, w6, w7] = words as [number, number, number, number, number, number, number, number]
  if (zero(0, 5) && (w5 === 0xffff || w5 === 0)) return w5 === 0 && w6 === 0 && w7 <= 1 ? [] : [v4(w6, w7)]
  if (zero(0, 4) && w4 === 0xffff && w5 === 0) return [v4(w6, w7)]
  if (w0 === 0x64 && w1 === 0xff9b && zero(2, 6)) return [v4(w6, w7)]
  if (w0 === 0x2002) return [v4(w1, w2)]
  if (w0 === 0x2001 && w1 === 0) return [v4(w2, w3), v4(~w6 & 0xffff, ~w7 & 0xffff)]
  return []
}

const expandIpv6 = (address: string): Array<number> | undefined => {
  if (Net.isIPv6(address) === false) return undefined
  let text = address
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(text)
  if (dotted !== null) {
    const parts = dotted[1]!.split(".").map(Number)
    text = text.slice(0, -dotted[1]!.length) + `${((parts[0]! << 8) | parts[1]!).toString(16)}:` +
      ((parts[2]! << 8) | parts[3]!).toString(16)
  }
  const [head, tail] = text.split("::") as [string, string | undefined]
  const parse = (s: string) => (s === "" ? [] : s.split(":").map((w) => parseInt(w, 16)))
  const left = parse(head)
  const right = tail === undefined ? [] : parse(tail)
  const fill = 8 - left.length - right.length
  if (tail === undefined && fill !== 0) return undefined
  return [...left, ...Array.from({ length: Math.max(0, fill) }, () => 0), ...right]
}

const familyOf = (address: string): "ipv4" | "ipv6" | undefined =>
  Net.isIPv4(address) ? "ipv4" : Net.isIPv6(address) ? "ipv6" : undefined

const inRanges = (address: string, family: "ipv4" | "ipv6"): string | undefined => {
  for (const [base, prefix, kind, what] of RANGES) {
    if (kind !== family) continue
    const list = new Net.BlockList()
    list.addSubnet(base, prefix, kind)
    if (list.check(address, family)) return what
  }
  return undefined
}

const inAllow = (address: string, family: "ipv4" | "ipv6", allow: ReadonlyArray<string>): boolean => {
  for (const range of allow) {
    const [base, bits] = range.split("/") as [string, string | undefined]
    const kind = familyOf(base)
    if (kind !== family) continue
    const list = new Net.BlockList()
    const prefix = bits === undefined ? (kind === "ipv4" ? 32 : 128) : Number(bits)
    if (!Number.isInteger(prefix)) continue
    list.addSubnet(base, prefix, kind)
    if (list.check(address, family)) return true
  }
  return false
}

/**
 * Why `address` may not be connected to under `policy` ("a loopback address"), or undefined when it may. An IPv6
 * address that carries IPv4 addresses (see `embeddedIpv4`) is judged by each of them too: it is refused when
 * any is not public, unless `allow` covers that one (or the IPv6 address itself).
 */
export const addressProblem = (address: string, policy: AddressPolicy): string | undefined => {
  if (policy._tag === "any") return undefined
  const family = familyOf(address)
  if (family === undefined) return "not an IP address"
  const allow = policy.allow ?? []
  if (inAllow(address, family, allow)) return undefined
  const own = inRanges(address, family)
  if (own !== undefined || family === "ipv4") return own
  for (const inner of embeddedIpv4(address)) {
    const what = inRanges(inner, "ipv4")
    if (what !== undefined && !inAllow(inner, "ipv4", allow)) return what
  }
  return undefined
}

/** Whether a range in `allow_private_addresses` is well formed (`10.0.0.0/8`, `127.0.0.1`, `fd00::/8`). */
export const isRange = (range: string): boolean => {
  const [base, bits, ...rest] = range.split("/")
  if (rest.length > 0 || base === undefined) return false
  const kind = familyOf(base)
  if (kind === undefined) return false
  if (bits === undefined) return true
  const prefix = Number(bits)
  return /^\d+$/.test(bits) && prefix >= 0 && prefix <= (kind === "ipv4" ? 32 : 128)
}

// ---------------------------------------------------------------------------------------------------------
// Requests

/** A web request that did not produce a response. */
export class WebRequestError extends Schema.TaggedError<WebRequestError>()("WebRequestError", {
  reason: Schema.Literal("bad_url", "blocked_address", "timeout", "too_many_redirects", "network"),
  message: Schema.String
}) {}

/** One request. */
export interface RequestSpec {
  readonly url: string
  readonly method?: "GET" | "POST" | undefined
  readonly headers?: Readonly<Record<string, string>> | undefined
  readonly body?: string | undefined
  /** The whole request, redirects included. */
  readonly timeoutMs: number
  /** Bytes of the body read at most (after decompression); the rest is dropped and `truncated` is set. */
  readonly maxBytes: number
  readonly maxRedirects: number
  readonly policy: AddressPolicy
  /**
   * The policy of a redirect to another host than the request's (default: `policy`): a service the operator named
   * at a private address may be reached (on any port or scheme of its host), not whatever address it redirects to.
   */
  readonly redirectPolicy?: AddressPolicy | undefined
}

/** A response. */
export interface Response {
  readonly status: number
  readonly headers: Readonly<Record<string, string>>
  readonly body: Uint8Array
  readonly truncated: boolean
  /** The URL the body came from, after redirects. */
  readonly url: string
}

const USER_AGENT = "Mozilla/5.0 (compatible; Antler/0.1; +https://github.com/antler-agent)"

class Blocked extends Error {
  readonly code = "EADDRBLOCKED"
}

/** A `lookup` for sockets that resolves once and refuses a name with any address the policy forbids. */
const guardedLookup = (policy: AddressPolicy): Net.LookupFunction =>
  ((hostname: string, options: Dns.LookupOptions, callback: (...args: Array<any>) => void) => {
    Dns.lookup(hostname, { ...options, all: true }, (error, addresses) => {
      if (error !== null) return callback(error)
      const list = addresses as Array<Dns.LookupAddress>
      for (const entry of list) {
        const problem = addressProblem(entry.address, policy)
        if (problem !== undefined) {
          return callback(new Blocked(`${hostname} resolves to ${entry.address}, ${problem}`))
        }
      }
      if (list.length === 0) {
        return callback(Object.assign(new Error(`${hostname} has no address`), { code: "ENOTFOUND" }))
      }
      if (options.all === true) return callback(null, list)
      return callback(null, list[0]!.address, list[0]!.family)
    })
  }) as Net.LookupFunction

const headerRecord = (headers: Http.IncomingHttpHeaders): Record<string, string> => {
  const out: Record<string, string> = {}
  for (const [name, value] of Object.entries(headers)) {
    if (value !== undefined) out[name] = Array.isArray(value) ? value.join(", ") : value
  }
  return out
}

const decoded = (response: Http.IncomingMessage): Readable => {
  switch ((response.headers["content-encoding"] ?? "").toLowerCase().trim()) {
    case "gzip":
    case "x-gzip":
      return response.pipe(Zlib.createGunzip())
    case "deflate":
      return response.pipe(Zlib.createInflate())
    case "br":
      return response.pipe(Zlib.createBrotliDecompress())
    default:
      return response
  }
}

interface Hop {
  readonly status: number
  readonly headers: Record<string, string>
  readonly body: Uint8Array
  readonly truncated: boolean
}

const networkMessage = (error: unknown): string => {
  const code = (error as NodeJS.ErrnoException).code
  const message = error instanceof Error ? error.message : String(error)
  switch (code) {
    case "ENOTFOUND":
    case "EAI_AGAIN":
      return `the host name could not be resolved (${code})`
    case "ECONNREFUSED":
      return "the connection was refused"
    case "ECONNRESET":
      return "the connection was reset"
    case "ETIMEDOUT":
      return "the connection timed out"
    default:
      return message
  }
}

const hop = (url: URL, spec: RequestSpec, method: "GET" | "POST", body: string | undefined) =>
  Effect.async<Hop, WebRequestError>((resume, signal) => {
    const options: Https.RequestOptions = {
      method,
      headers: {
        "user-agent": USER_AGENT,
        accept: "text/html,application/xhtml+xml,application/json;q=0.9,text/plain;q=0.8,*/*;q=0.5",
        "accept-encoding": "gzip, deflate, br",
        ...spec.headers,
        ...(body !== undefined ? { "content-length": String(Buffer.byteLength(body)) } : {})
      },
      signal,
      lookup: guardedLookup(spec.policy)
    }
    let settled = false
    const done = (result: Hop | WebRequestError) => {
      if (settled) return
      settled = true
      if (result instanceof WebRequestError) resume(Effect.fail(result))
      else resume(Effect.succeed(result))
    }
    const onError = (error: unknown) => {
      if (signal.aborted) return
      done(
        error instanceof Blocked || (error as { code?: string }).code === "EADDRBLOCKED"
          ? new WebRequestError({ reason: "blocked_address", message: (error as Error).message })
          : new WebRequestError({ reason: "network", message: networkMessage(error) })
      )
    }
    const request = (url.protocol === "https:" ? Https : Http).request(url, options, (response) => {
      const status = response.statusCode ?? 0
      const headers = headerRecord(response.headers)
      if (status >= 300 && status < 400 && headers.location !== undefined) {
        response.resume()
        return done({ status, headers, body: new Uint8Array(), truncated: false })
      }
      const chunks: Array<Buffer> = []
      let size = 0
      let truncated = false
      const stream = decoded(response)
      stream.on("data", (chunk: Buffer) => {
        if (truncated) return
        const room = spec.maxBytes - size
        if (chunk.length > room) {
          chunks.push(chunk.subarray(0, room))
          size += room
          truncated = true
          response.destroy()
          done({ status, headers, body: new Uint8Array(Buffer.concat(chunks)), truncated })
          return
        }
        chunks.push(chunk)
        size += chunk.length
      })
      stream.on("end", () => {
        if (!truncated) done({ status, headers, body: new Uint8Array(Buffer.concat(chunks)), truncated })
      })
      stream.on("error", (error) => {
        if (!truncated) onError(error)
      })
    })
    request.on("error", onError)
    if (body !== undefined) request.write(body)
    request.end()
  })

// Headers that carry credentials: never sent on to another origin after a redirect.
const CREDENTIAL_HEADERS = /^(authorization|cookie|x-api-key|x-subscription-token)$/i

/** Checks a URL before any connection: http(s) only, and an IP-literal host against the policy. */
export const urlProblem = (raw: string, policy: AddressPolicy): WebRequestError | URL => {
  let url: URL
  try {
    url = new URL(raw)
  } catch {
    return new WebRequestError({ reason: "bad_url", message: `not a valid URL: ${JSON.stringify(raw.slice(0, 200))}` })
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    return new WebRequestError({
      reason: "bad_url",
      message: `only http:// and https:// URLs can be fetched, not ${url.protocol}`
    })
  }
  const host = url.hostname.startsWith("[") ? url.hostname.slice(1, -1) : url.hostname
  if (familyOf(host) !== undefined) {
    const problem = addressProblem(host, policy)
    if (problem !== undefined) {
      return new WebRequestError({ reason: "blocked_address", message: `${host} is ${problem}` })
    }
  }
  return url
}

/**
 * Makes a request, following up to `maxRedirects` redirects (each hop checked like the first; credentials
 * are not carried to another origin). Fails with `WebRequestError` when no response could be had.
 */
export const request = (spec: RequestSpec): Effect.Effect<Response, WebRequestError> =>
  Effect.gen(function*() {
    let current = urlProblem(spec.url, spec.policy)
    let method = spec.method ?? "GET"
    let body = spec.body
    let headers = spec.headers
    const host = current instanceof URL ? current.hostname : undefined
    const policyOf = (url: URL) => url.hostname === host ? spec.policy : spec.redirectPolicy ?? spec.policy
    for (let redirects = 0;; redirects++) {
      if (current instanceof WebRequestError) return yield* current
      const url: URL = current
      const result = yield* hop(url, { ...spec, headers, policy: policyOf(url) }, method, body)
      const location = result.status >= 300 && result.status < 400 ? result.headers.location : undefined
      if (location === undefined) {
        const { body: bytes, headers: received, status, truncated } = result
        return { status, headers: received, body: bytes, truncated, url: url.href }
      }
      if (redirects >= spec.maxRedirects) {
        return yield* new WebRequestError({
          reason: "too_many_redirects",
          message: `more than ${spec.maxRedirects} redirects (the last one to ${location.slice(0, 200)})`
        })
      }
      let next: URL
      try {
        next = new URL(location, url)
      } catch {
        return yield* new WebRequestError({
          reason: "bad_url",
          message: `a redirect to an invalid URL: ${location.slice(0, 200)}`
        })
      }
      if (result.status === 303 || ((result.status === 301 || result.status === 302) && method === "POST")) {
        method = "GET"
        body = undefined
      }
      if (next.origin !== url.origin && headers !== undefined) {
        headers = Object.fromEntries(Object.entries(headers).filter(([name]) => !CREDENTIAL_HEADERS.test(name)))
      }
      current = urlProblem(next.href, policyOf(next))
    }
  }).pipe(
    Effect.timeoutFail({
      duration: spec.timeoutMs,
      onTimeout: () =>
        new WebRequestError({
          reason: "timeout",
          message: `no complete answer within ${Math.round(spec.timeoutMs / 100) / 10} s`
        })
    })
  )
