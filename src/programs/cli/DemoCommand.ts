/** `antler demo`: a complete run, offline, with a SCRIPTED model on a local server (see Demo.ts). */
import * as Command from "@effect/cli/Command"
import * as Effect from "effect/Effect"
import * as ConfigFile from "../../layers/ConfigFile.js"
import * as CliCommand from "./CliCommand.js"
import { CliExit, ExitCode } from "./CliCommand.js"
import * as Demo from "./Demo.js"

const command = Command.make("demo", {}, () =>
  Effect.flatMap(ConfigFile.home, CliCommand.dataHome).pipe(
    Effect.zipRight(Effect.suspend(() => Demo.run(CliCommand.invocation()))),
    Effect.flatMap((code) => (code === ExitCode.ok ? Effect.void : Effect.fail(new CliExit({ code })))),
    Effect.catchAll(CliCommand.reportFailure("demo failed"))
  ))

/** `antler demo`. */
export const entry: CliCommand.Entry = {
  name: "demo",
  command,
  help: {
    summary: "See a complete run, offline: a SCRIPTED model on a local server, real tools and storage",
    usage: ["demo"],
    description: "No real model is called: a loopback server replays a script through the real OpenAI client. " +
      "The run goes through the real agent, writes a file in the thread's sandbox, reads it back, and is saved " +
      "like any thread (in $ANTLER_HOME, else ~/.antler), so threads list and threads show work on it. A second " +
      "turn continues the same thread. It ignores config.yaml.",
    examples: [["demo", "Try Antler before configuring a model"]]
  }
}
