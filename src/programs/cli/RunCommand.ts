/**
 * `antler run "<prompt>"`: one turn of a thread, streamed. The prompt comes from the words after `run`, or
 * from stdin (`-`, or no words and a pipe). The thread is new, named (`--thread ID`) or the most recent one
 * (`--continue`). A run on a new thread that fails before the model replies leaves no thread behind.
 * `--agent NAME` runs a custom agent (its SOUL, model, tool groups and skills); `--subagents` lets the agent
 * delegate with `task`; both are run settings the factory resolves (`agent_name`, `subagent_enabled`). With
 * `mcp_tasks.enabled`, the run has the gateway's MCP task runtime and waits for the tasks it submitted
 * (`McpTaskWait`).
 */
import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import * as OtelTracing from "../../layers/OtelTracing.js"
import { Memory } from "../../services/Memory.js"
import { ThreadStore } from "../../services/ThreadStore.js"
import * as TraceContext from "../../services/TraceContext.js"
import * as SkillSecrets from "../../services/SkillSecrets.js"
import * as Tracing from "../../services/Tracing.js"
import * as M from "../../state/Message.js"
import * as App from "../App.js"
import * as CliCommand from "./CliCommand.js"
import { CliExit, ExitCode, fail } from "./CliCommand.js"
import * as Factory from "../Factory.js"
import * as McpTaskWait from "./McpTaskWait.js"
import * as Render from "./Render.js"
import * as RunSecrets from "./RunSecrets.js"
import * as Upload from "../Upload.js"
import { uploadFiles } from "./UploadCommand.js"

/** The longest prompt read from stdin. */
export const MAX_STDIN_BYTES = 4 * 1024 * 1024

/** Reads stdin to its end (a usage error past `MAX_STDIN_BYTES`). */
const readStdin = Effect.async<string, CliExit>((resume) => {
  const stdin = process.stdin
  const chunks: Array<Buffer> = []
  let size = 0
  const stop = () => {
    stdin.off("data", onData).off("end", onEnd).off("error", onError)
    stdin.pause()
  }
  const onData = (chunk: Buffer) => {
    size += chunk.length
    if (size <= MAX_STDIN_BYTES) return void chunks.push(chunk)
    stop()
    resume(fail(ExitCode.usage, `antler run: the prompt on stdin is longer than ${MAX_STDIN_BYTES / 1024 / 1024} MiB.`))
  }
  const onEnd = () => {
    stop()
    resume(Effect.succeed(Buffer.concat(chunks).toString("utf8")))
  }
  const onError = (error: Error) => {
    stop()
    resume(fail(ExitCode.usage, `antler run: cannot read the prompt from stdin: ${error.message}`))
  }
  stdin.on("data", onData).on("end", onEnd).on("error", onError)
  return Effect.sync(stop)
})

/**
 * The prompt: the words joined, each `-` replaced by stdin (its last line end dropped); with no words, stdin
 * when it is not a terminal. An empty prompt is a usage error, whose hints are typed as `antler` (how Antler is run).
 */
const promptOf = (words: ReadonlyArray<string>, antler: string) =>
  Effect.gen(function*() {
    const terminal = process.stdin.isTTY === true
    const help = `\nRun \`${antler} run --help\` for its usage.`
    if (words.length === 0 && terminal) {
      return yield* fail(
        ExitCode.usage,
        `antler run: what should the agent do? Give a prompt: ${antler} run "<prompt>", or pipe one in: ` +
          `echo "<prompt>" | ${antler} run -${help}`
      )
    }
    const stdin = words.includes("-") || words.length === 0 ? (yield* readStdin).replace(/\r?\n$/, "") : ""
    const prompt = words.length === 0 ? stdin : words.map((word) => (word === "-" ? stdin : word)).join(" ")
    if (prompt.trim() === "") {
      return yield* fail(ExitCode.usage, `antler run: the prompt is empty.${help}`)
    }
    return prompt
  })

/**
 * The run settings of the command line: the chosen model (left to a custom agent when it is given without
 * `--model` or `--base-url`, so the agent's own model is used), plan mode, the custom agent, subagents.
 */
export const runSettings = (
  modelName: string,
  flags: {
    readonly modelGiven?: boolean | undefined
    readonly plan?: boolean | undefined
    readonly agent?: string | undefined
    readonly subagents?: boolean | undefined
  }
): Factory.RunSettings => ({
  ...(flags.agent === undefined || flags.modelGiven === true ? { model_name: modelName } : {}),
  ...(flags.plan === true ? { is_plan_mode: true } : {}),
  ...(flags.agent !== undefined ? { agent_name: flags.agent } : {}),
  ...(flags.subagents === true ? { subagent_enabled: true } : {})
})

/** The thread a run continues (`--continue`: the most recently updated one) or starts. */
const chooseThread = (home: string, given: Option.Option<string>, latest: boolean) =>
  Effect.gen(function*() {
    const store = yield* ThreadStore
    if (latest) {
      // ISO 8601 times sort as strings (localeCompare's first use loads a collator)
      const threads = [...yield* store.list].sort((a, b) =>
        a.updated_at < b.updated_at ? 1 : a.updated_at > b.updated_at ? -1 : 0
      )
      if (threads[0] === undefined) {
        return yield* fail(
          ExitCode.runFailed,
          `No thread to continue in ${home}. Start one with: ${CliCommand.invocation()} run "<prompt>"`
        )
      }
      return { threadId: threads[0].thread_id, newThread: false }
    }
    if (Option.isSome(given)) {
      return { threadId: given.value, newThread: Option.isNone(yield* store.load(given.value)) }
    }
    return { threadId: M.newId(), newThread: true }
  })

/** The longest `--wait-tasks` (a week). */
const MAX_WAIT_TASKS = 7 * 24 * 3600

const command = Command.make(
  "run",
  {
    prompt: Args.text({ name: "prompt" }).pipe(Args.repeated),
    thread: Options.text("thread").pipe(Options.optional),
    continue: Options.boolean("continue"),
    model: Options.text("model").pipe(Options.optional),
    baseUrl: Options.text("base-url").pipe(Options.optional),
    apiKey: Options.redacted("api-key").pipe(Options.optional),
    config: CliCommand.config,
    files: Options.file("file", { exists: "yes" }).pipe(Options.repeated),
    plan: Options.boolean("plan"),
    agent: Options.text("agent").pipe(Options.optional),
    subagents: Options.boolean("subagents"),
    secrets: Options.text("secret").pipe(Options.repeated),
    waitTasks: Options.integer("wait-tasks").pipe(Options.withDefault(600)),
    json: CliCommand.json,
    verbose: Options.boolean("verbose")
  },
  (args) =>
    Effect.gen(function*() {
      if (args.continue && Option.isSome(args.thread)) {
        return yield* fail(
          ExitCode.usage,
          "antler run: --continue picks the most recent thread and --thread names one; give only one of them."
        )
      }
      if (args.waitTasks < 0 || args.waitTasks > MAX_WAIT_TASKS) {
        return yield* fail(
          ExitCode.usage,
          `antler run: --wait-tasks is a number of seconds from 0 (do not wait) to ${MAX_WAIT_TASKS}; ` +
            `${args.waitTasks} is not.`
        )
      }
      const given = Option.isSome(args.thread)
        ? Option.some(yield* CliCommand.threadIdFrom(args.thread.value))
        : Option.none<string>()
      // (the request's secrets, read from the environment before anything else: a name that is not there is a
      // usage error, never a run without it)
      const antler = CliCommand.invocation()
      const requestSecrets = yield* Either.match(RunSecrets.fromEnvironment(args.secrets, process.env, antler), {
        onLeft: (message) => fail(ExitCode.usage, `antler run: ${message}`),
        onRight: Effect.succeed
      })
      const prompt = yield* promptOf(args.prompt, antler)
      const app = yield* CliCommand.loadConfig(Option.getOrUndefined(args.config))
      yield* CliCommand.checkTools(app)
      yield* CliCommand.checkMcpTasks(app, "antler run")
      const { choice, env } = yield* CliCommand.chooseModel(app, args)
      const tracing = OtelTracing.settings(app.config.tracing)
      const secrets = [...yield* App.toolSecrets(app), ...OtelTracing.secrets(tracing)]
      // (the request's secrets, each line of one of several lines, in their encoded forms too, as a gateway run's)
      const redact = SkillSecrets.runRedactor(App.redactor(choice.models, env, secrets), requestSecrets)
      const invocation = antler
      const runId = M.newId()
      const settings = runSettings(choice.name, {
        modelGiven: Option.isSome(args.model) || Option.isSome(args.baseUrl),
        plan: args.plan,
        agent: Option.getOrUndefined(args.agent),
        subagents: args.subagents
      })
      const program = Effect.gen(function*() {
        const factory = yield* Factory.AgentFactory
        // the run's agent is built before anything is printed: a configuration it cannot be built from is a
        // configuration error (exit 2), not a failed run; so is a custom agent that does not exist
        // (the CLI's runs are an admin's: see below)
        const resolved = yield* factory.resolve(settings, undefined, true)
        yield* factory.agent(resolved)
        const { newThread, threadId } = yield* chooseThread(app.home, given, args.continue)
        if (!args.json) {
          const s = Render.style(Render.useColor())
          const status = newThread ? "new; continue it with --continue" : "continuing"
          const model = resolved.model ?? choice.models.find((m) => m.name === choice.name)
          const baseUrl = model?.base_url ?? model?.api_base ?? choice.baseUrl
          const where = baseUrl ? ` at ${baseUrl}` : ""
          const agent = resolved.agentName === undefined ? "" : ` · agent ${resolved.agentName}`
          const subagents = resolved.subagents.enabled ? " · subagents on" : ""
          const line = Render.safeText(
            `thread ${threadId} (${status})${agent} · model ${model?.model ?? choice.model}${where}${subagents}`,
            redact
          )
          yield* Render.write(s.dim(`${line}\n`))
        }
        const uploaded = args.files.length === 0 ? [] : yield* uploadFiles(app, threadId, args.files, args.json)
        // (the trace of the program that started this one, when it says so: OpenTelemetry's TRACEPARENT)
        const parent = yield* TraceContext.fromEnvironment
        const outcome = yield* Render.run(
          // the CLI's user owns the data directory: its runs are an admin's (see gateway/Auth.ts)
          factory.run({
            threadId,
            runId,
            prompt,
            files: Upload.messageFiles(uploaded),
            settings,
            admin: true,
            ...(requestSecrets === undefined ? {} : { secrets: requestSecrets })
          }).pipe(
            Stream.withSpan(
              Tracing.RUN_SPAN,
              Tracing.runSpanOptions({
                "antler.thread_id": threadId,
                "antler.run_id": runId,
                // the CLI's user, as a run without a user is DeerFlow's (its traces' `user_id` falls back to it)
                "antler.user_id": "default",
                "antler.agent_name": resolved.agentName ?? "lead_agent",
                "gen_ai.request.model": resolved.model?.model ?? choice.model
              }, parent === undefined ? undefined : TraceContext.parentSpan(parent))
            )
          ),
          {
            json: args.json,
            threadId,
            runId,
            redact,
            verbose: args.verbose,
            model: resolved.model?.model ?? choice.model,
            invocation,
            newThread
          }
        )
        // A new thread whose run failed before the model replied holds only the question: it is not kept.
        if (Render.discardable(outcome.end, outcome.replied, newThread)) {
          yield* Effect.ignoreLogged(App.deleteThread(app.home, threadId))
        }
        // the background tasks the run submitted: waited for, and how each ended shown
        if (CliCommand.exitCodeOf(outcome.end) === ExitCode.ok) {
          yield* McpTaskWait.follow(threadId, runId, { json: args.json, redact, waitSeconds: args.waitTasks, antler })
        }
        // the process ends here: the memory update of this run is made now rather than after its debounce
        const memory = yield* Memory
        if ((yield* memory.pending) > 0) {
          if (!args.json) yield* Render.write(Render.style(Render.useColor()).dim("updating long-term memory…\n"))
          yield* memory.flush
        }
        return outcome.end
      })
      const end = yield* program.pipe(
        Effect.provide(
          App.factoryLayer(app, choice, {}, redact, undefined, undefined, McpTaskWait.runtimeLayer(app, redact))
        ),
        // spans are flushed when the run is over, before the process ends
        Effect.provide(OtelTracing.layer(tracing)),
        CliCommand.withCleanLogs(redact, { quiet: !args.json && !args.verbose, home: app.home }),
        CliCommand.reportAgentFailures(app, redact, "error", "Invalid run settings")
      )
      const code = CliCommand.exitCodeOf(end)
      if (code !== ExitCode.ok) return yield* Effect.fail(new CliExit({ code }))
    })
)

/** `antler run`. */
export const entry: CliCommand.Entry = {
  name: "run",
  command,
  help: {
    summary: "Ask the agent something: it answers as it thinks, using tools in a sandbox",
    usage: ["run [options] <prompt>...", "run [options] -          (the prompt from stdin)"],
    description: "Runs one turn of a thread: the model answers (streamed as it comes), may call tools (files and " +
      "bash in the thread's sandbox, shown one line each, with a command's output as it runs) and stops when it " +
      "is done or asks you something. Without --thread or --continue a new thread is started; its id is printed " +
      "so you can come back to it.\n\n" +
      "With mcp_tasks enabled, the run then waits for the long-running MCP tasks it submitted and prints how " +
      "each ended, at most --wait-tasks seconds (Ctrl-C stops waiting).\n\n" +
      "Exit codes: 0 done; 1 the run failed; 2 a usage or configuration error; 3 the agent asks you a question " +
      "(answer with run --thread ID \"<answer>\"); 130 stopped with Ctrl-C (completed steps are saved). A run on " +
      "a new thread that fails before the model replies keeps nothing.",
    arguments: [[
      "<prompt>...",
      "What to ask. Several words are joined; a - is replaced by stdin. With no words and a pipe, stdin is the " +
      "prompt. A prompt that starts with - goes after --: run -- \"-1 is negative?\""
    ]],
    options: [
      ["--thread ID", "Continue this thread (its id from threads list), or start one with this id"],
      ["--continue", "Continue the most recently used thread"],
      ["--model NAME", "A model named in config.yaml, or the model id to ask for with --base-url"],
      ["--base-url URL", "An OpenAI-compatible endpoint, such as http://localhost:11434/v1 (Ollama)"],
      [
        "--api-key KEY",
        "The key for --base-url. Visible in the process list: prefer OPENAI_API_KEY or $VAR in config.yaml"
      ],
      CliCommand.CONFIG_HELP,
      [
        "--file PATH",
        "Attach a file (repeat for more): copied into the thread's uploads; PDF, DOCX, XLSX, PPTX and HTML also " +
        "get a Markdown copy"
      ],
      ["--plan", "Plan mode: the agent keeps a todo list of multi-step work, printed each time it changes"],
      [
        "--agent NAME",
        "Run this custom agent (see agents list): its SOUL.md, model (unless --model is given), tool groups and " +
        "skills; it can change itself with update_agent"
      ],
      [
        "--subagents",
        "Let the agent delegate self-contained sub-tasks to subagents with the task tool (at most 3 at once per " +
        "response; their progress is shown nested under the call)"
      ],
      [
        "--secret NAME",
        "Give the run the secret in $NAME (repeat for more), as a gateway run's context.secrets: the bash commands " +
        "of a skill in use that declares it (required-secrets) and MCP servers whose config names ${secret:NAME} " +
        "get it; hidden from everything printed and stored. Never a value here: NAME=... antler run --secret NAME"
      ],
      [
        "--wait-tasks SECONDS",
        "With mcp_tasks enabled, wait at most this long (default 600; 0: not at all) for the long-running MCP tasks " +
        "the run submitted; past it the CLI says which still go on and exits 0 (a later run or antler serve " +
        "follows them)"
      ],
      [
        "--json",
        "Print every run event as one JSON object per line (for programs), ending with run_end (then one " +
        "background_task object per long-running MCP task the run submitted, as it ends)"
      ],
      [
        "--verbose",
        "Also show what is normally left out: each tool call's full arguments, every event's raw data, passed " +
        "audits, and the log lines on stderr"
      ]
    ],
    examples: [
      ["run \"Summarise README.md in three bullet points\"", "Ask with the model from config.yaml or OPENAI_*"],
      ["run --base-url http://localhost:11434/v1 --model llama3.2 \"Hello\"", "Use a local Ollama server"],
      ["run --continue \"Now shorter\"", "Continue the most recent thread"],
      ["run --file notes.pdf \"What are the action items?\"", "Ask about a document"],
      ["run --agent ada \"What should I read next?\"", "Talk to your custom agent ada (see agents create)"],
      ["run --subagents \"Compare these three libraries\"", "Let the agent hand parts of the work to subagents"],
      ["run \"Explain this diff:\" - < changes.diff", "Add stdin to the prompt"],
      ["run --secret ERP_TOKEN \"/erp-report last month\"", "Give a skill the secret in $ERP_TOKEN"],
      ["run --json \"Hello\" | jq -r 'select(.type==\"token\") | .text'", "Only the streamed text, with jq"]
    ]
  }
}
