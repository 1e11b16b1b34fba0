/**
 * The `HostResolver` over the system's resolver (`getaddrinfo`, as DeerFlow's `socket.getaddrinfo`), every
 * address of a name, within a deadline. A failure or the deadline is "no address", which a caller refuses.
 */
import * as Dns from "node:dns"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { HostResolver, type Service } from "../../services/HostResolver.js"

/** Options of the system resolver. */
export interface Options {
  /** How long one lookup may take. Default 5 s. */
  readonly timeoutMs?: number | undefined
}

/** The system's resolver. */
export const make = (options: Options = {}): Service => ({
  lookup: (host) =>
    Effect.tryPromise(() => Dns.promises.lookup(host, { all: true, verbatim: true })).pipe(
      Effect.map((entries) => entries.map((entry) => entry.address)),
      Effect.timeout(options.timeoutMs ?? 5_000),
      Effect.orElseSucceed((): ReadonlyArray<string> => [])
    )
})

/** The system's resolver as the app's `HostResolver`. */
export const layer = (options: Options = {}): Layer.Layer<HostResolver> => Layer.succeed(HostResolver, make(options))
