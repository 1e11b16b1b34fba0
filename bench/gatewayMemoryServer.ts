/**
 * The gateway of `antler serve` with its threads in memory (`MemoryThreadStore`), for the like-for-like row of
 * `npm run bench:gateway` (LangGraph's dev server keeps its threads in memory too). The same `Gateway.layer` as
 * `antler serve`, over the configuration file given, on 127.0.0.1 and a free port; prints the address as
 * `antler serve` does, and serves until SIGTERM.
 *
 *   ANTLER_HOME=dir node dist-bench/bench/gatewayMemoryServer.js config.json
 */
import * as HttpServer from "@effect/platform/HttpServer"
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as fs from "node:fs"
import * as ConfigFile from "../src/layers/ConfigFile.js"
import * as MemoryThreadStore from "../src/layers/MemoryThreadStore.js"
import * as App from "../src/programs/App.js"
import * as Gateway from "../src/programs/gateway/Gateway.js"

const file = process.argv[2]
const home = process.env.ANTLER_HOME
if (file === undefined || home === undefined) throw new Error("usage: ANTLER_HOME=dir gatewayMemoryServer.js config.json")

const program = Effect.gen(function*() {
  const app = yield* ConfigFile.fromObject(JSON.parse(fs.readFileSync(file, "utf8")), { home, source: file })
  const choice = Either.getOrThrow(App.chooseModel(app.config.models, {}, {}))
  const redact = App.redactor(choice.models, {}, Gateway.secrets(app.config))
  const announce = Effect.gen(function*() {
    const address = (yield* HttpServer.HttpServer).address
    if (address._tag !== "TcpAddress") throw new Error("expected a TCP address")
    process.stdout.write(`antler gateway listening on http://127.0.0.1:${address.port}\n`)
  })
  return yield* Layer.launch(
    Layer.effectDiscard(announce).pipe(Layer.provideMerge(Gateway.layer({
      app,
      choice,
      host: "127.0.0.1",
      port: 0,
      redact,
      store: MemoryThreadStore.layer()
    })))
  )
})

NodeRuntime.runMain(program.pipe(Effect.provide(NodeContext.layer)))
