/**
 * Attack round 22 on the keyed web providers, as a hostile or broken provider: a provider's own address is the
 * operator's (it may be private: a self-hosted one), but a redirect it answers to another host is not the
 * operator's choice. Before, a provider's redirect was followed to any address, so a provider could turn Antler's
 * request on a private or loopback service of its network (here: `localhost`, from a provider at `127.0.0.1`). A
 * redirect on the provider's own host (another path, port or scheme) is still followed.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as ConfigFile from "../../src/layers/ConfigFile.js"
import * as LocalSandbox from "../../src/layers/LocalSandbox.js"
import * as ToolAssembly from "../../src/programs/ToolAssembly.js"
import { AppConfigService } from "../../src/services/AppConfig.js"
import * as Tool from "../../src/services/Tool.js"
import * as M from "../../src/state/Message.js"
import { provideRun, tempDirs } from "../support/fixtures.js"
import * as HttpServer from "../support/httpServer.js"

const tempDir = tempDirs()
const KEY = "sk-test-provider-key-0123456789"

const serperAt = (url: string) =>
  Effect.gen(function*() {
    const tools = [{
      name: "web_search",
      group: "web",
      use: "deerflow.community.serper.tools:web_search_tool",
      base_url: url,
      api_key: KEY
    }]
    const app = yield* ConfigFile.fromObject({ tools }, { home: tempDir("antler-attack22-redirect-") })
    const assembly = yield* ToolAssembly.assemble({ vision: false }).pipe(
      Effect.provide(LocalSandbox.layer().pipe(Layer.provideMerge(Layer.succeed(AppConfigService, app))))
    )
    return assembly.tools.find((t) => t.name === "web_search")!
  })

const search = (tool: Tool.Tool) =>
  Tool.invoke(tool, { id: "c", name: tool.name, args: { query: "effect" } }).pipe(
    Effect.map((r) => M.contentText(r.message.content)),
    provideRun
  )

const answer = JSON.stringify({ organic: [{ title: "Inside", link: "https://inside.example/", snippet: "secret" }] })

describe("a provider's redirect", () => {
  it.scopedLive("to another host at a private address is refused; on its own host it is followed", () =>
    Effect.gen(function*() {
      const inside = yield* HttpServer.start((_, res) => HttpServer.reply(res, 200, answer, "application/json"))
      const target = `http://localhost:${inside.port}/search`
      const provider = yield* HttpServer.start((req, res) => {
        const location = req.url === "/search" ? target : undefined
        res.writeHead(location === undefined ? 404 : 307, location === undefined ? {} : { location })
        res.end()
      })
      const refused = yield* search(yield* serperAt(provider.url))
      assert.lengthOf(inside.requests, 0, "the private service behind the redirect was never asked")
      assert.include(refused, "Error")
      assert.notInclude(refused, "Inside")
      assert.notInclude(refused, KEY)
      // the operator's own host, redirecting to another port of it: followed
      const own = yield* HttpServer.start((req, res) => {
        res.writeHead(307, { location: `http://127.0.0.1:${inside.port}/search` })
        res.end()
      })
      const followed = yield* search(yield* serperAt(own.url))
      assert.include(followed, "Inside")
      assert.lengthOf(inside.requests, 1)
    }))
})
