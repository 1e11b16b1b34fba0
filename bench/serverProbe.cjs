/**
 * A probe for a gateway under `npm run bench:gateway`, to tell where a slow request waited. It is loaded into
 * the server's node: `node dist-bench/bench/gatewayLoad.js ... --node-arg --require=$PWD/bench/serverProbe.cjs`.
 * Every 2 s, and at exit, it writes `server-probe-<pid>.json` (in `SERVER_PROBE_DIR`, else the system's temporary
 * folder) with:
 * - `loop`: the event loop's delay (p50, p99, max, in ms), and each stall of 200 ms or more (when, how long);
 * - `joins`: for each rejoin (a GET of a run's stream), the ms from Node's `request` event to the response's
 *   headers, the ms from its connection's `connection` event (accepted) to that `request` event, and whether it
 *   came on a connection that had served a request before.
 * The client's side of the same rejoins is in the bench's JSON (`g3.*.headersMs`, `slowestResumes`): the time a
 * request waited before the server's `request` event is the one minus the other.
 */
"use strict"
const fs = require("node:fs")
const http = require("node:http")
const os = require("node:os")
const path = require("node:path")
const { monitorEventLoopDelay, performance } = require("node:perf_hooks")

const out = path.join(process.env.SERVER_PROBE_DIR || os.tmpdir(), `server-probe-${process.pid}.json`)
const joins = []
const served = new WeakSet()
const acceptedAt = new WeakMap()
const emit = http.Server.prototype.emit
http.Server.prototype.emit = function (event, ...args) {
  if (event === "connection") acceptedAt.set(args[0], performance.now())
  if (event === "request") {
    const [request, response] = args
    const socket = request.socket
    const reusedConnection = served.has(socket)
    served.add(socket)
    if (request.method === "GET" && /\/runs\/[^/?]+\/stream/.test(request.url ?? "")) {
      const at = performance.now()
      const accepted = acceptedAt.get(socket)
      const join = {
        atMs: Math.round(at),
        reusedConnection,
        sinceAcceptedMs: accepted === undefined ? null : Math.round(at - accepted),
        headersMs: null
      }
      joins.push(join)
      const writeHead = response.writeHead
      response.writeHead = function (...headArgs) {
        join.headersMs = Math.round((performance.now() - at) * 10) / 10
        return writeHead.apply(this, headArgs)
      }
    }
  }
  return emit.apply(this, arguments)
}

const delay = monitorEventLoopDelay({ resolution: 10 })
delay.enable()
const stalls = []
let last = performance.now()
setInterval(() => {
  const now = performance.now()
  if (now - last >= 200) stalls.push({ atMs: Math.round(last), ms: Math.round(now - last) })
  last = now
}, 20).unref()

const write = () => {
  const ms = (ns) => Math.round(ns / 1e4) / 100
  const loop = { p50: ms(delay.percentile(50)), p99: ms(delay.percentile(99)), max: ms(delay.max), stalls }
  fs.writeFileSync(out, JSON.stringify({ pid: process.pid, loop, joins }))
}
setInterval(write, 2000).unref()
process.on("exit", write)
