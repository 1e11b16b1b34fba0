/**
 * `antler serve` logging as DeerFlow's gateway does (test_logging_config.py, test_logging_level_from_config.py):
 * `log_level` of `config.yaml` sets how much it logs (`--log-level` wins over it), and with `logging.enhance.enabled`
 * each line names the trace id of the request it was logged for, as text (`[trace_id=...]`, `-` outside a request)
 * or as JSON lines. A real `antler serve` process, its model a SCRIPTED Chat Completions server in this process.
 */
import { afterAll, assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Scope from "effect/Scope"
import * as Path from "node:path"
import * as ScriptedChatServer from "../../../src/layers/ScriptedChatServer.js"
import type { ChatRequestBody, Turn } from "../../../src/layers/ScriptedChatServer.js"
import { type ServeProcess, serveProcess, writeServeConfig } from "../../support/cli.js"
import { eventually } from "../../support/poll.js"
import * as Support from "../gateway/support.js"

/** A question saying "flaky" gets a 503 first (the retry middleware warns), then its answer. */
const failed = new Set<string>()
const script = (body: ChatRequestBody): Turn => {
  const asked = Support.lastUserText(body)
  if (asked.includes("flaky") && !failed.has(asked)) {
    failed.add(asked)
    return { status: 503 }
  }
  return "Done."
}

const scope = Effect.runSync(Scope.make())
const servers: Array<ServeProcess> = []
afterAll(async () => {
  for (const server of servers) server.child.kill("SIGKILL")
  await Effect.runPromise(Scope.close(scope, Exit.void))
})

/** Starts `antler serve` over the scripted model with `more` of config.yaml (and `args`). */
const serve = async (more: Record<string, unknown>, args: ReadonlyArray<string> = []) => {
  const scripted = await Effect.runPromise(Scope.extend(ScriptedChatServer.start(script), scope))
  const home = Support.tempDir("antler-servelogs-")
  const config = writeServeConfig(Path.join(home, "config.yaml"), scripted.url, {
    sandbox: { allow_host_bash: false },
    llm_call: { retry_base_delay_ms: 5, retry_cap_delay_ms: 10 },
    ...more
  })
  const server = serveProcess(home, config, args)
  servers.push(server)
  return { server, url: await server.url }
}

/** A run to its end on a new thread, its request carrying `traceId`. */
const runWith = async (url: string, question: string, traceId: string) => {
  const post = (path: string, body: unknown) =>
    fetch(`${url}${path}`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-trace-id": traceId },
      body: JSON.stringify(body)
    })
  const thread = await (await post("/threads", {})).json() as any
  const answer = await post(`/threads/${thread.thread_id}/runs/wait`, {
    assistant_id: "lead_agent",
    input: Support.userInput(question)
  })
  assert.strictEqual(answer.status, 200)
  assert.strictEqual(answer.headers.get("x-trace-id"), traceId)
}

describe("antler serve's logs", () => {
  it("log_level: debug lets the run's debug lines out, each naming its request's trace id as text", async () => {
    const { server, url } = await serve({
      log_level: "DEBUG ",
      logging: { enhance: { enabled: true, format: "text" } }
    })
    await runWith(url, "a question", "cli-trace-1")
    // the token usage line, logged by the run at debug (hidden at the default level, warning)
    const usage = await eventually(
      async () => server.output().split("\n").find((line) => line.includes("LLM token usage")),
      () => `the token usage line in: ${server.output()}`
    )
    assert.match(usage, /^\d{4}-\d\d-\d\dT[\d:.]+Z - DEBUG - \[trace_id=cli-trace-1\] - LLM token usage: model=/)
    // a line logged outside any request names none
    assert.match(server.output(), /Z - INFO - \[trace_id=-\] - scheduled tasks: this process polls/)
  })

  it("--log-level wins over log_level; JSON lines name the trace id; lines below the level are left out", async () => {
    const { server, url } = await serve(
      { log_level: "error", logging: { enhance: { enabled: true, format: "json" } } },
      ["--log-level", "warning"]
    )
    await runWith(url, "a flaky question", "cli-trace-2")
    const retry = await eventually(
      async () => server.output().split("\n").find((line) => line.includes("model call failed, retrying")),
      () => `the retry warning in: ${server.output()}`
    )
    const record = JSON.parse(retry)
    assert.strictEqual(record.level, "WARNING")
    assert.strictEqual(record.trace_id, "cli-trace-2")
    assert.match(record.message, /^model call failed, retrying in \d+ms/)
    assert.match(record.timestamp, /^\d{4}-\d\d-\d\dT/)
    // debug and info lines stay out at warning
    assert.notInclude(server.output(), "LLM token usage")
    assert.notInclude(server.output(), "scheduled tasks: this process polls")
  })

  it("refuses a log_level it does not know, naming the levels", async () => {
    const home = Support.tempDir("antler-servelogs-")
    const config = writeServeConfig(Path.join(home, "config.yaml"), "http://127.0.0.1:9/v1", {
      log_level: "verbose"
    })
    const server = serveProcess(home, config)
    servers.push(server)
    assert.strictEqual(await server.exited, 2)
    assert.include(server.output(), "log_level")
    assert.include(server.output(), "expected a log level: notset, debug, info, warn, warning, error, fatal, critical")
  })
})
