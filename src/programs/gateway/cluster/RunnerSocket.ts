/**
 * The sockets between the runners of a cluster, with a shared secret (`gateway.cluster.secret`): @effect/cluster's
 * socket runner (`SocketRunner`, the one `NodeClusterSocket.layer` builds) over a server socket that lets a
 * connection's bytes reach the runner's RPC server only once the peer proved it knows the secret, and a client
 * socket that proves it on every connection it opens.
 *
 * The proof is a challenge and response: on accepting a connection the runner sends 32 random bytes, the peer
 * answers the HMAC-SHA256 of them under the secret (the secret itself never crosses the network, and an answer
 * overheard cannot be replayed on another connection). A wrong answer, or none within `HANDSHAKE_TIMEOUT`, closes
 * the connection before anything of it was read as a message. The messages that follow are not encrypted: the
 * runners' network should still be private (or tunnelled).
 *
 * Without a secret, the connections are those of `NodeClusterSocket.layer`; with or without, they send with
 * TCP_NODELAY (see `layerSocketServer`).
 */
import * as MessageStorage from "@effect/cluster/MessageStorage"
import * as RunnerHealth from "@effect/cluster/RunnerHealth"
import type { RunnerAddress } from "@effect/cluster/RunnerAddress"
import * as Runners from "@effect/cluster/Runners"
import type { Sharding } from "@effect/cluster/Sharding"
import * as ShardingConfig from "@effect/cluster/ShardingConfig"
import * as SocketRunner from "@effect/cluster/SocketRunner"
import * as SqlMessageStorage from "@effect/cluster/SqlMessageStorage"
import * as SqlRunnerStorage from "@effect/cluster/SqlRunnerStorage"
import * as Socket from "@effect/platform/Socket"
import * as SocketServer from "@effect/platform/SocketServer"
import * as NodeSocket from "@effect/platform-node/NodeSocket"
import * as NodeSocketServer from "@effect/platform-node/NodeSocketServer"
import * as RpcClient from "@effect/rpc/RpcClient"
import * as RpcSerialization from "@effect/rpc/RpcSerialization"
import type { SqlClient } from "@effect/sql/SqlClient"
import type { ConfigError } from "effect/ConfigError"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Scope from "effect/Scope"
import * as Crypto from "node:crypto"
import * as Net from "node:net"
import * as SerialConnections from "./SerialConnections.js"

/** The bytes of the challenge, and of the answer. */
export const CHALLENGE_BYTES = 32

/** How long an accepted connection has to answer the challenge. */
export const HANDSHAKE_TIMEOUT = "5 seconds"

const LABEL = "antler/cluster/runner-handshake/1"

/** The answer to `challenge` under `secret`. */
export const answer = (secret: Redacted.Redacted<string>, challenge: Uint8Array): Uint8Array =>
  Crypto.createHmac("sha256", Redacted.value(secret)).update(LABEL).update(challenge).digest()

const refused = (message: string) =>
  new Socket.SocketGenericError({ reason: "Read", cause: new Error(`runner connection refused: ${message}`) })

const concat = (a: Uint8Array, b: Uint8Array) => {
  const out = new Uint8Array(a.length + b.length)
  out.set(a, 0)
  out.set(b, a.length)
  return out
}

/**
 * An accepted connection whose bytes reach `run`'s handler only after the challenge was answered; a wrong answer,
 * or none in time, fails `run` (and the connection is closed).
 */
export const guard = (socket: Socket.Socket, secret: Redacted.Redacted<string>): Socket.Socket => {
  const run = <_, E, R>(
    handler: (_: Uint8Array) => Effect.Effect<_, E, R> | void,
    options?: { readonly onOpen?: Effect.Effect<void> | undefined }
  ): Effect.Effect<void, Socket.SocketError | E, R> =>
    Effect.scoped(Effect.gen(function*() {
      const challenge = Crypto.randomBytes(CHALLENGE_BYTES)
      const expected = answer(secret, challenge)
      const write = yield* socket.writer
      let received: Uint8Array = new Uint8Array(0)
      let proven = false
      const guarded = (chunk: Uint8Array | string): Effect.Effect<_, E | Socket.SocketError, R> | void => {
        const bytes = typeof chunk === "string" ? new TextEncoder().encode(chunk) : chunk
        if (proven) return handler(bytes)
        received = concat(received, bytes)
        if (received.length < CHALLENGE_BYTES) return
        if (!Crypto.timingSafeEqual(received.subarray(0, CHALLENGE_BYTES), expected)) {
          return Effect.fail(refused("the peer did not answer the challenge with the cluster's secret"))
        }
        proven = true
        const rest = received.subarray(CHALLENGE_BYTES)
        received = new Uint8Array(0)
        return rest.length > 0 ? handler(rest) : undefined
      }
      const onOpen = Effect.zipRight(
        Effect.orDie(write(challenge)),
        options?.onOpen ?? Effect.void
      )
      const deadline = Effect.sleep(HANDSHAKE_TIMEOUT).pipe(
        Effect.zipRight(Effect.suspend(() =>
          proven ? Effect.never : Effect.fail(refused("no answer to the challenge in time"))
        ))
      )
      return yield* Effect.raceFirst(socket.run(guarded, { onOpen }), deadline)
    }))
  return Socket.Socket.of({ ...socket, run, runRaw: run })
}

/** A socket server whose connections are guarded (`guard`). */
export const guardServer = (
  server: SocketServer.SocketServer["Type"],
  secret: Redacted.Redacted<string>
): SocketServer.SocketServer["Type"] => ({
  ...server,
  run: (handler) => server.run((socket) => handler(guard(socket, secret)))
})

/**
 * A connection to `address`, with TCP_NODELAY (see `layerSocketServer`); with a secret, it answers the runner's
 * challenge before it is used.
 */
export const connect = (address: RunnerAddress, secret: Redacted.Redacted<string> | undefined) =>
  NodeSocket.fromDuplex(
    Effect.scopeWith((scope) => {
      let conn: Net.Socket | undefined
      return Effect.flatMap(
        Scope.addFinalizer(scope, Effect.sync(() => conn?.destroy())),
        () =>
          Effect.async<Net.Socket, Socket.SocketError>((resume) => {
            let done = false
            const settle = (effect: Effect.Effect<Net.Socket, Socket.SocketError>) => {
              if (done) return
              done = true
              resume(effect)
            }
            const socket = Net.createConnection({ host: address.host, port: address.port, noDelay: true })
            conn = socket
            if (secret === undefined) {
              socket.once("connect", () => settle(Effect.succeed(socket)))
            }
            const onReadable = () => {
              if (secret === undefined) return
              const challenge = socket.read(CHALLENGE_BYTES) as Buffer | null
              if (challenge === null) return
              socket.off("readable", onReadable)
              socket.write(answer(secret, challenge))
              settle(Effect.succeed(socket))
            }
            if (secret !== undefined) socket.on("readable", onReadable)
            socket.on("error", (cause) => settle(Effect.fail(new Socket.SocketGenericError({ reason: "Open", cause }))))
            socket.once("close", () =>
              settle(Effect.fail(
                new Socket.SocketGenericError({ reason: "Open", cause: new Error("closed before the handshake") })
              )))
          })
      )
    }),
    { openTimeout: 2000 }
  )

/** The runners' client protocol (over guarded connections, with a secret). */
export const layerClientProtocol = (
  secret: Redacted.Redacted<string> | undefined
): Layer.Layer<Runners.RpcClientProtocol, never, RpcSerialization.RpcSerialization> =>
  Layer.effect(
    Runners.RpcClientProtocol,
    Effect.gen(function*() {
      const serialization = yield* RpcSerialization.RpcSerialization
      return (address: RunnerAddress) =>
        Effect.flatMap(connect(address, secret), (socket) =>
          RpcClient.makeProtocolSocket().pipe(
            Effect.provideService(Socket.Socket, socket),
            Effect.provideService(RpcSerialization.RpcSerialization, serialization)
          ))
    })
  )

/**
 * The runner's socket server (guarded, with a secret). Its connections, as the runners' client connections, send
 * with TCP_NODELAY: a run's events stream to the process following it as small messages, each acknowledged by the
 * follower, and Nagle's algorithm (Node's default for raw sockets) held each until the peer's delayed ACK, some 40 ms,
 * so routing added 77 ms to every event on a quiet machine.
 */
export const layerSocketServer = (
  secret: Redacted.Redacted<string> | undefined
): Layer.Layer<SocketServer.SocketServer, SocketServer.SocketServerError, ShardingConfig.ShardingConfig> =>
  Layer.unwrapEffect(Effect.gen(function*() {
    const config = yield* ShardingConfig.ShardingConfig
    const listen = Option.orElse(config.runnerListenAddress, () => config.runnerAddress)
    if (Option.isNone(listen)) return yield* Effect.die("the runner has no listen address")
    const server = NodeSocketServer.layer({ host: listen.value.host, port: listen.value.port, noDelay: true })
    return secret === undefined ? server : Layer.effect(
      SocketServer.SocketServer,
      Effect.map(SocketServer.SocketServer, (unguarded) => guardServer(unguarded, secret))
    ).pipe(Layer.provide(server))
  }))

/** Options of a runner (as `NodeClusterSocket.layer`'s, with SQL storage). */
export interface Options {
  readonly shardingConfig: Partial<ShardingConfig.ShardingConfig["Type"]>
  /** The cluster's shared secret: without it, `NodeClusterSocket.layer` unguarded. */
  readonly secret?: Redacted.Redacted<string> | undefined
}

/**
 * A runner with SQL storage, pinging runners for their health, as `NodeClusterSocket.layer({ storage: "sql" })`
 * builds it, over sockets with TCP_NODELAY, guarded when there is a secret.
 */
export const layer = (
  options: Options
): Layer.Layer<
  Sharding | Runners.Runners | MessageStorage.MessageStorage,
  SocketServer.SocketServerError | ConfigError,
  SqlClient
> => {
  const clientProtocol = layerClientProtocol(options.secret)
  return SocketRunner.layer.pipe(
    Layer.provide([layerSocketServer(options.secret), clientProtocol]),
    Layer.provide(RunnerHealth.layerPing.pipe(Layer.provide(Runners.layerRpc), Layer.provide(clientProtocol))),
    Layer.provideMerge(Layer.orDie(SqlMessageStorage.layer)),
    // (its shard locks' connection takes their statements in turn: `SerialConnections`)
    Layer.provide(Layer.orDie(SqlRunnerStorage.layer).pipe(Layer.provide(SerialConnections.layer))),
    Layer.provide(ShardingConfig.layerFromEnv(options.shardingConfig)),
    Layer.provide(RpcSerialization.layerMsgPack)
  )
}
