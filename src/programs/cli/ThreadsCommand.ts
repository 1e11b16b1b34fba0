/**
 * `antler threads list | show ID | delete ID`: the saved threads of the data directory (`ANTLER_HOME`, else
 * `~/.antler`), the same whatever directory the command runs in.
 */
import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { ThreadStore } from "../../services/ThreadStore.js"
import * as App from "../App.js"
import * as CliCommand from "./CliCommand.js"
import { ExitCode, fail } from "./CliCommand.js"
import * as Render from "./Render.js"

const notFound = (home: string, threadId: string) =>
  fail(
    ExitCode.runFailed,
    `No thread "${threadId}" in ${home}. List the saved threads with: ${CliCommand.invocation()} threads list`
  )

const list: CliCommand.Entry = {
  name: "list",
  command: Command.make("list", { json: CliCommand.json }, (args) =>
    CliCommand.withStore((home) =>
      Effect.gen(function*() {
        const threads = yield* (yield* ThreadStore).list
        if (args.json) return yield* Render.write(`${JSON.stringify(threads)}\n`)
        const options = { color: Render.useColor(), invocation: CliCommand.invocation() }
        yield* Render.write(Render.threadList(threads, home, options))
      })
    )),
  help: {
    summary: "List the saved threads, newest first, with their status",
    usage: ["threads list [--json]"],
    description: "One line per thread: its id, when it last changed, its status (completed, waiting for your " +
      "answer, failed, cancelled, running), its steps and its title. Threads are kept in $ANTLER_HOME, else " +
      "~/.antler, whatever the directory you run in.",
    options: [["--json", "Print the list as one JSON array (id, title, times, steps, status, stop_reason)"]],
    examples: [["threads list", "What you talked about, and what is waiting for an answer"]]
  }
}

const show: CliCommand.Entry = {
  name: "show",
  command: Command.make("show", { id: Args.text({ name: "id" }), json: CliCommand.json }, (args) =>
    CliCommand.withStore((home) =>
      Effect.gen(function*() {
        const threadId = yield* CliCommand.threadIdFrom(args.id)
        const loaded = yield* (yield* ThreadStore).load(threadId)
        if (Option.isNone(loaded)) return yield* notFound(home, threadId)
        if (args.json) yield* Render.write(`${JSON.stringify(loaded.value)}\n`)
        else yield* Render.write(Render.thread(loaded.value, { color: Render.useColor() }))
      })
    )),
  help: {
    summary: "Show a thread: its runs, every message and tool call, title, files and token usage",
    usage: ["threads show [--json] <id>"],
    arguments: [["<id>", "The thread's id (from threads list, or printed by run)"]],
    options: [["--json", "Print the stored state as one JSON object"]],
    examples: [["threads show 7f3c…", "Read a conversation again, tool calls and results included"]]
  }
}

const remove: CliCommand.Entry = {
  name: "delete",
  command: Command.make("delete", { id: Args.text({ name: "id" }) }, (args) =>
    CliCommand.withStore((home) =>
      Effect.gen(function*() {
        const threadId = yield* CliCommand.threadIdFrom(args.id)
        const deleted = yield* Effect.catchIf(
          App.deleteThread(home, threadId),
          (error) => error.operation === "delete",
          (error) => fail(ExitCode.runFailed, error.message)
        )
        if (!deleted) return yield* notFound(home, threadId)
        yield* Render.write(`Deleted thread ${threadId} and its files.\n`)
      })
    )),
  help: {
    summary: "Delete a thread: its messages and runs, and its files (workspace, uploads, outputs)",
    usage: ["threads delete <id>"],
    description: "There is no undo. A thread whose run is in progress is not deleted (exit code 1).",
    arguments: [["<id>", "The thread's id (from threads list)"]],
    examples: [["threads delete 7f3c…", "Forget a thread and remove its files"]]
  }
}

const subcommands = [list, show, remove]

/** `antler threads`. */
export const entry: CliCommand.Entry = {
  name: "threads",
  command: Command.make("threads").pipe(Command.withSubcommands([list.command, show.command, remove.command])),
  subcommands,
  help: {
    summary: "The saved threads: list, show, delete",
    usage: ["threads list", "threads show <id>", "threads delete <id>"],
    description: "A thread is one conversation: its messages, tool calls and files. Threads are kept in " +
      "$ANTLER_HOME, else ~/.antler; continue one with run --thread ID, or the latest with run --continue."
  }
}
