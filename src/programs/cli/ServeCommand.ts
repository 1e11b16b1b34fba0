/**
 * `antler serve [--host HOST] [--port PORT] [--config FILE] [--model NAME] [--base-url URL] [--api-key KEY]`:
 * the LangGraph-compatible gateway (SPEC §12) and its web page, until Ctrl-C or SIGTERM (running runs are then
 * cancelled with their completed steps saved, pending memory updates get half a second, and the process ends
 * within about two seconds; a runner of a cluster drains instead, see `gateway/cluster/ClusterRuns`, and exits 0).
 * The model is chosen as
 * `antler run` chooses it; the others in `config.yaml` stay available to runs by name. The first line on
 * stdout is the address it listens on. An edit of `config.yaml` is taken for the runs that start after it (see
 * `ConfigReload`): the model is chosen again over it, with the same flags.
 */
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as HttpServer from "@effect/platform/HttpServer"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import type { AppConfig } from "../../services/AppConfig.js"
import * as Redact from "../../state/Redact.js"
import * as App from "../App.js"
import * as CliCommand from "./CliCommand.js"
import { ExitCode, fail } from "./CliCommand.js"
import * as LogSettings from "./LogSettings.js"
import * as Render from "./Render.js"

const command = Command.make(
  "serve",
  {
    host: Options.text("host").pipe(Options.optional),
    port: Options.integer("port").pipe(Options.optional),
    config: CliCommand.config,
    model: Options.text("model").pipe(Options.optional),
    baseUrl: Options.text("base-url").pipe(Options.optional),
    apiKey: Options.redacted("api-key").pipe(Options.optional)
  },
  (args) =>
    Effect.gen(function*() {
      // (loaded here: the gateway's declarations and server are no part of the other commands' start)
      const Gateway = yield* Effect.promise(() => import("../gateway/Gateway.js"))
      const app = yield* CliCommand.loadConfig(Option.getOrUndefined(args.config))
      yield* CliCommand.checkTools(app)
      const { choice, env } = yield* CliCommand.chooseModel(app, args)
      const secrets = [...yield* App.toolSecrets(app), ...Gateway.secrets(app.config)]
      // (growing, and the gateway's own: the secrets it learns later, the MCP servers' and an edit's, leave the logs
      // hidden too)
      const redact = Redact.growing(App.redactor(choice.models, env, secrets))
      const host = Option.getOrElse(args.host, () => app.config.gateway.host)
      const port = Option.getOrElse(args.port, () => app.config.gateway.port)
      if (port < 0 || port > 65535) {
        return yield* fail(ExitCode.usage, `antler serve: --port must be between 0 and 65535, got ${port}.`)
      }
      const tokens = app.config.gateway.auth.tokens.length
      const announce = Effect.gen(function*() {
        const address = (yield* HttpServer.HttpServer).address
        const where = address._tag === "TcpAddress"
          ? `http://${address.hostname.includes(":") ? `[${address.hostname}]` : address.hostname}:${address.port}`
          : address.path
        yield* Render.write(`antler gateway listening on ${where}\n`)
        yield* Render.write(
          `  threads: ${Gateway.describeStore(app)} · model: ${Render.safeText(choice.name, redact)} · ` +
            (tokens > 0 ? `${tokens} API token${tokens === 1 ? "" : "s"}` : "open (no API tokens; loopback only)") +
            "\n"
        )
      })
      const flags: App.ModelFlags = {
        model: Option.getOrUndefined(args.model),
        baseUrl: Option.getOrUndefined(args.baseUrl),
        apiKey: Option.getOrUndefined(Option.map(args.apiKey, Redacted.value))
      }
      // (an edit of config.yaml: the model chosen again over it, as at the start)
      const reload = { choose: (config: AppConfig) => App.chooseModel(config.models, flags, env) }
      const served = Layer.launch(
        Layer.effectDiscard(announce).pipe(
          Layer.provideMerge(Gateway.layer({ app, choice, host, port, redact, reload }))
        )
      ).pipe(
        CliCommand.withCleanLogs(redact),
        // (outside the cleaning: the lines it writes are cleaned too)
        LogSettings.configured(app.config),
        Effect.catchTags({
          GatewayStartError: (error) => fail(ExitCode.usage, `antler serve: ${error.message}`),
          StoreError: (error) => fail(ExitCode.runFailed, `antler serve: ${Render.safeText(error.message, redact)}`),
        }),
        CliCommand.reportAgentFailures(app, redact, "antler serve", "Configuration error")
      )
      if (app.config.gateway.cluster == null) return yield* served
      // a runner of a cluster stopped by a signal has drained (its runs ended or were handed over to the other
      // runners) once the gateway is released: an orderly stop, exit 0 (a defect: the interruption that stops the
      // command drops typed failures)
      return yield* Effect.uninterruptibleMask((restore) =>
        Effect.flatMap(Effect.exit(restore(served)), (exit) =>
          Exit.isFailure(exit) && Cause.isInterruptedOnly(exit.cause)
            ? Effect.die(new CliCommand.CliExit({ code: ExitCode.ok }))
            : exit)
      )
    })
)

/** `antler serve`. */
export const entry: CliCommand.Entry = {
  name: "serve",
  command,
  help: {
    summary: "Serve the agent over HTTP: the LangGraph API (SDK, DeerFlow's frontend) and a web page",
    usage: ["serve [--host HOST] [--port PORT] [--config FILE] [--model NAME] [--base-url URL] [--api-key KEY]"],
    description: "Starts the gateway: the LangGraph Platform API that @langchain/langgraph-sdk clients and " +
      "DeerFlow's frontend use (assistants, threads, runs streamed as server-sent events, rejoin with " +
      "Last-Event-ID, cancel, stateless runs, uploads, artifacts, models, skills), and a small chat page at /. " +
      "It prints the address it listens on, then serves until Ctrl-C or SIGTERM; runs still going are then " +
      "cancelled with their completed steps saved (exit 130). A runner of a cluster (gateway.cluster) drains " +
      "instead: its runs go on for up to gateway.cluster.drain_seconds, then the others are handed over to the " +
      "other runners, which resume them; it then exits 0.\n\n" +
      "An edit of config.yaml is taken for the runs that start after it, without a restart (the model chosen " +
      "again with the same flags); an edit that does not decode is refused with a warning, and the sections read at " +
      "the start (gateway, database, tracing, log_level, logging, sandbox, skills, memory...) take effect on a " +
      "restart.\n\n" +
      "log_level in config.yaml sets how much it logs on stderr (--log-level wins); logging.enhance.enabled gives " +
      "each request a trace id (its X-Trace-Id, or a new one), answered in the response's X-Trace-Id and named in " +
      "the log lines of the request and of the run it starts (logging.enhance.format: text or json).\n\n" +
      "Runs execute in the server, not in the request: a client may disconnect and join again. Runs a previous " +
      "process left unfinished are recorded as error (stop reason orphan_recovered) when it starts. Threads are " +
      "kept in the data directory's SQLite file, or in PostgreSQL with database.url (several processes may share " +
      "it).\n\n" +
      "Bound to a loopback address it may run without API tokens (every request is user default, the CLI's); " +
      "bound anywhere else it refuses to start unless gateway.auth.tokens maps tokens to users, and each user " +
      "sees only their own threads. Exit codes: 0 stopped (a runner of a cluster, drained); 1 the store cannot be " +
      "opened; 2 a usage or configuration error (an unsafe address, or one it cannot listen on, included); 130 " +
      "stopped by Ctrl-C or SIGTERM.",
    options: [
      ["--host HOST", "The address to listen on (default gateway.host, 127.0.0.1)"],
      ["--port PORT", "The port (default gateway.port, 8001; 0 picks a free port)"],
      CliCommand.CONFIG_HELP,
      ["--model NAME", "The default model of runs: a model named in config.yaml, or the model id for --base-url"],
      ["--base-url URL", "An OpenAI-compatible endpoint, such as http://localhost:11434/v1 (Ollama)"],
      [
        "--api-key KEY",
        "The key for --base-url. Visible in the process list: prefer OPENAI_API_KEY or $VAR in config.yaml"
      ]
    ],
    examples: [
      ["serve", "Serve on http://127.0.0.1:8001 (open: loopback only); open it in a browser"],
      ["serve --port 0", "Serve on any free port (the first line says which)"],
      ["serve --host 0.0.0.0 --config prod.yaml", "Serve on every interface (needs gateway.auth.tokens)"]
    ]
  }
}
