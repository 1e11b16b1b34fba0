/**
 * One runner of the feasibility experiment (issue 30, step 1): a `Thread` entity on @effect/cluster over
 * PostgreSQL storage (SqlMessageStorage, SqlRunnerStorage on @effect/sql-pg), runners talking over sockets.
 * Arguments: the database URL, the runner's port, an HTTP port. `GET /ask?thread=<id>` sends `Whoami` to the
 * thread's entity from this process and answers what the entity said (the port of the runner that ran it) and
 * this process's port; `POST /persisted?thread=<id>` sends a persisted message. Prints `ready` when both listen.
 */
import * as Entity from "@effect/cluster/Entity"
import * as RunnerAddress from "@effect/cluster/RunnerAddress"
import * as ClusterSchema from "@effect/cluster/ClusterSchema"
import * as NodeClusterSocket from "@effect/platform-node/NodeClusterSocket"
import * as Rpc from "@effect/rpc/Rpc"
import * as PgClient from "@effect/sql-pg/PgClient"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import * as Http from "node:http"

const [url, runnerPort, httpPort] = [process.argv[2]!, Number(process.argv[3]), Number(process.argv[4])]

const Thread = Entity.make("Thread", [
  Rpc.make("Whoami", { success: Schema.Struct({ runner: Schema.Number, thread: Schema.String }) }),
  Rpc.make("Note", { payload: { text: Schema.String }, success: Schema.Struct({ runner: Schema.Number }) })
    .annotate(ClusterSchema.Persisted, true)
])

const ThreadLive = Thread.toLayer(Effect.gen(function*() {
  const address = yield* Entity.CurrentAddress
  return {
    Whoami: () => Effect.succeed({ runner: runnerPort, thread: address.entityId }),
    Note: () => Effect.succeed({ runner: runnerPort })
  }
}))

const ClusterLive = NodeClusterSocket.layer({
  storage: "sql",
  shardingConfig: { runnerAddress: Option.some(RunnerAddress.make("127.0.0.1", runnerPort)) }
}).pipe(Layer.provide(PgClient.layer({ url: Redacted.make(url) })))

const program = Effect.gen(function*() {
  const client = yield* Thread.client
  const run = Effect.runPromise
  const server = Http.createServer((req, res) => {
    const address = new URL(req.url ?? "/", "http://x")
    const thread = address.searchParams.get("thread") ?? "t"
    const effect = address.pathname === "/persisted"
      ? client(thread).Note({ text: "hello" })
      : client(thread).Whoami()
    run(Effect.timeout(effect, "20 seconds")).then(
      (answer) => res.end(JSON.stringify({ ...answer, asked: runnerPort })),
      (error) => {
        res.statusCode = 500
        res.end(String(error))
      }
    )
  })
  yield* Effect.async<void>((resume) => {
    server.listen(httpPort, "127.0.0.1", () => resume(Effect.void))
  })
  console.log("ready")
  yield* Effect.never
})

Effect.runFork(program.pipe(Effect.provide(ThreadLive.pipe(Layer.provideMerge(ClusterLive)))))
