/**
 * `antler serve [--host HOST] [--port PORT] [--config FILE] [--model NAME] [--base-url URL] [--api-key KEY]`: the
 * LangGraph-compatible gateway (SPEC §12) and its web page, until Ctrl-C or SIGTERM (running runs are then
 * cancelled with their completed steps saved). The model is chosen as `antler run` chooses it; the others in
 * `config.yaml` stay available to runs by name. The first line on stdout is the address it listens on.
 */
import * as HttpServer from "@effect/platform/HttpServer"
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as ConfigError from "effect/ConfigError"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as ConfigFile from "../layers/ConfigFile.js"
import * as Redact from "../state/Redact.js"
import * as App from "./App.js"
import * as Gateway from "./gateway/Gateway.js"
import * as Render from "./Render.js"

/** Exit codes (the CLI's). */
const USAGE = 2
const FAILED = 1

/** Ends `antler serve` with an exit code after printing why. */
export class ServeExit extends Error {
  constructor(readonly code: number) {
    super(`exit ${code}`)
  }
}

const messageOf = (error: unknown): string => String((error as { message?: unknown } | undefined)?.message ?? error)

const fail = (code: number, message: string) =>
  Effect.zipRight(Render.writeError(`${message}\n`), Effect.fail(new ServeExit(code)))

/** The command. `exit` turns its failures into the CLI's exit (given by Cli.ts, which owns exit codes). */
export const command = <E>(exit: (code: number) => E) =>
  Command.make(
    "serve",
    {
      host: Options.text("host").pipe(
        Options.optional,
        Options.withDescription("Address to listen on (default gateway.host, 127.0.0.1)")
      ),
      port: Options.integer("port").pipe(
        Options.optional,
        Options.withDescription("Port (default gateway.port, 8001; 0: any free port)")
      ),
      config: Options.text("config").pipe(
        Options.optional,
        Options.withDescription("config.yaml to use (default: ANTLER_CONFIG, else ./config.yaml)")
      ),
      model: Options.text("model").pipe(
        Options.optional,
        Options.withDescription("The default model (a configured name)")
      ),
      baseUrl: Options.text("base-url").pipe(
        Options.optional,
        Options.withDescription("An OpenAI-compatible endpoint")
      ),
      apiKey: Options.redacted("api-key").pipe(Options.optional, Options.withDescription("The API key for --base-url"))
    },
    (args) =>
      Effect.gen(function*() {
        const app = yield* ConfigFile.load(Option.getOrUndefined(args.config)).pipe(
          Effect.catchTag("ConfigError", (error) =>
            fail(
              USAGE,
              `Configuration error (${error.issues.length} problem${error.issues.length === 1 ? "" : "s"}):\n` +
                error.message
            ))
        )
        yield* ConfigFile.ensureHome(app.home).pipe(
          Effect.catchTag("HomeError", (error) =>
            fail(
              USAGE,
              `Cannot use the data directory ${app.home} (ANTLER_HOME, default ./.antler): ${error.message}.`
            ))
        )
        if (app.ignored.length > 0) {
          yield* Render.writeError(
            `warning: ${app.source}: keys not used by Antler (ignored): ${app.ignored.join(", ")}\n`
          )
        }
        const env = yield* App.openAiEnv
        const choice = yield* Either.match(
          App.chooseModel(app.config.models, {
            model: Option.getOrUndefined(args.model),
            baseUrl: Option.getOrUndefined(args.baseUrl),
            apiKey: Option.getOrUndefined(Option.map(args.apiKey, Redacted.value))
          }, env),
          { onLeft: (error) => fail(USAGE, error.message), onRight: Effect.succeed }
        )
        const redact = Redact.make([...App.redactor(choice.models, env).secrets, ...Gateway.secrets(app.config)])
        const host = Option.getOrElse(args.host, () => app.config.gateway.host)
        const port = Option.getOrElse(args.port, () => app.config.gateway.port)
        if (port < 0 || port > 65535) return yield* fail(USAGE, `--port must be between 0 and 65535, got ${port}.`)
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
        return yield* Layer.launch(
          Layer.effectDiscard(announce).pipe(
            Layer.provideMerge(Gateway.layer({ app, models: choice.models, host, port, redact }))
          )
        ).pipe(
          Effect.catchTags({
            GatewayStartError: (error) => fail(USAGE, `antler serve: ${error.message}`),
            StoreError: (error) => fail(FAILED, `antler serve: ${Render.safeText(error.message, redact)}`),
            SettingsError: (error) => fail(USAGE, `Configuration error: ${error.message}`),
            ChainError: (error) => fail(USAGE, `Configuration error: ${error.message}`),
            GuardrailConfigError: (error) => fail(USAGE, `Configuration error: ${error.message}`),
            SafetyDetectorConfigError: (error) => fail(USAGE, `Configuration error: ${error.message}`)
          }),
          Effect.catchIf(ConfigError.isConfigError, (error) =>
            fail(USAGE, `Model configuration error: ${Render.safeText(String(error), redact)}`)),
          Effect.catchAll((error) =>
            error instanceof ServeExit
              ? Effect.fail(error)
              : fail(FAILED, `antler serve: ${Render.safeText(messageOf(error), redact)}`))
        )
      }).pipe(Effect.catchAll((error) => Effect.fail(exit(error.code))))
  ).pipe(Command.withDescription("Serve the LangGraph-compatible API and the web page"))
