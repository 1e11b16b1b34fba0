/**
 * The host resolver port: the addresses a host name has, as this machine would connect to them. The provider
 * fetchers that hand a URL to a reader inside the deployment's network (fastCRW, Browserless, Crawl4AI, a
 * self-hosted Firecrawl) ask it before they send the URL, so that a name that resolves to a private address is
 * refused (DeerFlow's `url_safety.validate_public_http_url`). The system's DNS is `layers/web/DnsResolver`; an app
 * or a test gives its own with `Layer.succeed(HostResolver, HostResolver.of({ lookup }))`.
 */
import * as Context from "effect/Context"
import type * as Effect from "effect/Effect"

/** A resolver. */
export interface Service {
  /**
   * Every address `host` (a name, not an address literal) resolves to; empty when it resolves to none, does not
   * resolve, or the resolver gave up. It never fails: a caller treats "no address" as "cannot be checked".
   */
  readonly lookup: (host: string) => Effect.Effect<ReadonlyArray<string>>
}

/** The host resolver. */
export class HostResolver extends Context.Tag("antler/HostResolver")<HostResolver, Service>() {}
