/**
 * `antler demo`: a complete run, offline, with a SCRIPTED model on a local server (see Demo.ts); with
 * `--model-server`, only that kind of server (DemoModel.ts), left running for `antler run` and `antler serve`.
 */
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as ConfigFile from "../../layers/ConfigFile.js"
import * as ScriptedChatServer from "../../layers/ScriptedChatServer.js"
import * as CliCommand from "./CliCommand.js"
import { CliExit, ExitCode, fail } from "./CliCommand.js"
import * as Demo from "./Demo.js"
import * as DemoModel from "./DemoModel.js"
import * as Render from "./Render.js"

/** The scripted model server, until Ctrl-C: its address and how to use it. */
const modelServer = (port: number) =>
  Effect.scoped(Effect.gen(function*() {
    const options = { model: "scripted", port, remember: false }
    const server = yield* ScriptedChatServer.start(DemoModel.script, options).pipe(
      Effect.catchAllDefect((defect) =>
        fail(ExitCode.usage, `antler demo: cannot listen on 127.0.0.1:${port}: ${(defect as Error)?.message ?? defect}`)
      )
    )
    const antler = CliCommand.invocation()
    yield* Render.write(
      `A SCRIPTED model (no real model is called) answers at ${server.url}\n` +
        "It answers with your own words, and writes a file when you mention one. Until Ctrl-C. In another terminal:\n" +
        `  ${antler} run --base-url ${server.url} --api-key none "write a file of notes"\n` +
        `  ${antler} serve --base-url ${server.url} --api-key none\n`
    )
    return yield* Effect.never
  }))

const command = Command.make(
  "demo",
  {
    modelServer: Options.boolean("model-server"),
    port: Options.integer("port").pipe(Options.optional)
  },
  (args) =>
    args.modelServer
      ? modelServer(Option.getOrElse(args.port, () => 8700))
      : Option.isSome(args.port)
      ? fail(ExitCode.usage, "antler demo: --port goes with --model-server.")
      : Effect.flatMap(ConfigFile.home, CliCommand.dataHome).pipe(
        Effect.zipRight(Effect.suspend(() => Demo.run(CliCommand.invocation()))),
        Effect.flatMap((code) => (code === ExitCode.ok ? Effect.void : Effect.fail(new CliExit({ code })))),
        Effect.catchAll(CliCommand.reportFailure("demo failed"))
      )
)

/** `antler demo`. */
export const entry: CliCommand.Entry = {
  name: "demo",
  command,
  help: {
    summary: "See a complete run, offline: a SCRIPTED model on a local server, real tools and storage",
    usage: ["demo", "demo --model-server [--port PORT]"],
    description: "No real model is called: a loopback server replays a script through the real OpenAI client. " +
      "The run goes through the real agent, writes a file in the thread's sandbox, reads it back, and is saved " +
      "like any thread (in $ANTLER_HOME, else ~/.antler), so threads list and threads show work on it. A second " +
      "turn continues the same thread. It ignores config.yaml. With --model-server it starts only the scripted " +
      "model, on 127.0.0.1, and leaves it running, so that antler run and antler serve can be tried offline " +
      "with --base-url.",
    options: [
      ["--model-server", "Start only the SCRIPTED model server and keep it running (Ctrl-C stops it)"],
      ["--port PORT", "Its port on 127.0.0.1 (default 8700)"]
    ],
    examples: [
      ["demo", "Try Antler before configuring a model"],
      ["demo --model-server", "A scripted model for antler run/serve --base-url http://127.0.0.1:8700/v1"]
    ]
  }
}
