/**
 * Attack round 23 on `web_fetch` readers, as the model (or a page it read) asking for an internal address by a DNS
 * name: a reader at an operator's `base_url` may be a self-hosted one inside the deployment's network (Jina AI's
 * reader is open source; so is a proxy of any of them), which fetches what it is sent from there. Firecrawl at a
 * `base_url` had its URLs' host names resolved and refused when private; Jina AI, Tavily, Exa, GroundRoute and
 * InfoQuest at a `base_url` were sent `https://internal.example.com/` (10.0.0.5) as is. Every reader at a `base_url`
 * is now held to the resolver. Real HTTP against loopback servers, an injected resolver (no DNS here).
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as ConfigFile from "../../src/layers/ConfigFile.js"
import * as LocalSandbox from "../../src/layers/LocalSandbox.js"
import * as Providers from "../../src/layers/web/Providers.js"
import * as ToolAssembly from "../../src/programs/ToolAssembly.js"
import { AppConfigService } from "../../src/services/AppConfig.js"
import { HostResolver } from "../../src/services/HostResolver.js"
import * as Tool from "../../src/services/Tool.js"
import * as M from "../../src/state/Message.js"
import { provideRun, tempDirs } from "../support/fixtures.js"
import * as HttpServer from "../support/httpServer.js"

const tempDir = tempDirs()
const KEY = "sk-test-reader-key-0123456789"
const HOSTS: Readonly<Record<string, ReadonlyArray<string>>> = {
  "example.com": ["93.184.215.14"],
  "internal.example.com": ["10.0.0.5"]
}

const fetchTool = (module: string, baseUrl: string, asked: Array<string>) =>
  Effect.gen(function*() {
    const app = yield* ConfigFile.fromObject({
      tools: [{
        name: "web_fetch",
        group: "web",
        use: `deerflow.community.${module}.tools:web_fetch_tool`,
        base_url: baseUrl,
        api_key: KEY
      }]
    }, { home: tempDir("antler-attack23-readers-") })
    const hosts = HostResolver.of({ lookup: (host) => Effect.sync(() => (asked.push(host), HOSTS[host] ?? [])) })
    const assembly = yield* ToolAssembly.assemble({ vision: false }).pipe(
      Effect.provide(LocalSandbox.layer().pipe(Layer.provideMerge(Layer.succeed(AppConfigService, app)))),
      Effect.provideService(HostResolver, hosts)
    )
    const tool = assembly.tools.find((t) => t.name === "web_fetch")
    assert.isDefined(tool, `${module}: ${assembly.warnings.join("; ")}`)
    return tool!
  })

const call = (tool: Tool.Tool, url: string) =>
  Tool.invoke(tool, { id: "c", name: tool.name, args: { url } }).pipe(
    Effect.map((r) => M.contentText(r.message.content)),
    provideRun
  )

describe("a web_fetch reader at a base_url", () => {
  it.scopedLive("is sent no URL whose host name resolves to a private address, whichever reader it is", () =>
    Effect.gen(function*() {
      for (const module of ["jina_ai", "tavily", "exa", "groundroute", "infoquest"]) {
        const server = yield* HttpServer.start((_, res) => HttpServer.reply(res, 500, "{}", "application/json"))
        const asked: Array<string> = []
        const tool = yield* fetchTool(module, server.url, asked)
        assert.strictEqual(
          yield* call(tool, "https://internal.example.com/admin"),
          "Error: web_fetch refused https://internal.example.com/admin: internal.example.com resolves to 10.0.0.5, " +
            "a private address. Only public addresses can be fetched (an operator can allow others with " +
            "allow_private_addresses).",
          module
        )
        assert.lengthOf(server.requests, 0, module)
        // a public name is sent on (what the reader answers is its own affair here)
        yield* call(tool, "https://example.com/")
        assert.lengthOf(server.requests, 1, module)
        assert.deepStrictEqual(asked, ["internal.example.com", "example.com"], module)
      }
    }))

  it.effect("is taken as self-hosted; the cloud services at their own address are not", () =>
    Effect.gen(function*() {
      for (const provider of ["jina", "tavily", "exa", "groundroute", "infoquest"] as const) {
        const cloud = yield* Providers.buildReader(provider, { api_key: KEY })
        assert.notStrictEqual(Either.getOrThrow(cloud).resolvesHost, true, provider)
        const own = yield* Providers.buildReader(provider, { api_key: KEY, base_url: "http://reader.internal:3000" })
        assert.strictEqual(Either.getOrThrow(own).resolvesHost, true, provider)
      }
    }))
})
