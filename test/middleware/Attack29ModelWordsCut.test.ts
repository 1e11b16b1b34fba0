/**
 * Attack round 29 on the cuts of the model's own words and one of the process's own secrets (a configured key:
 * `ProcessSecrets`), which the model may hold (a user pasted it, a file it read said it): SandboxAudit's record cuts a
 * bash command at 200 characters (the `sandbox_audit` event, the log, a medium-risk command's note the model reads),
 * and SubagentLimit describes a dropped task call by its prompt cut at 80 (the `subagent_limit` event, the notice the
 * model reads). Neither was masked before its cut, and the masks after it find whole values only: a key where a cut
 * fell had its beginning streamed and read. A subagent's answer is cut to a brief (head and tail, 2,000 characters) in
 * the `task` result's metadata and the delegation ledger, which the model reads and the thread keeps.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as DurableContext from "../../src/middleware/DurableContext.js"
import * as SandboxAudit from "../../src/middleware/SandboxAudit.js"
import * as SubagentLimit from "../../src/middleware/SubagentLimit.js"
import { ProcessSecrets } from "../../src/services/ProcessSecrets.js"
import type * as SubagentRunner from "../../src/services/SubagentRunner.js"
import * as Tool from "../../src/services/Tool.js"
import * as Redact from "../../src/state/Redact.js"
import * as H from "../support/harness.js"

const KEY = "sk-proc-a29-words-0123456789abcdef"
const START = KEY.slice(0, 8)
const processSecrets = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.provideService(effect, ProcessSecrets, Redact.make([KEY]))

const customs = (o: H.Outcome, name: string) =>
  o.events.flatMap((e) => (e.type === "custom" && e.name === name ? [e.data as any] : []))

// (a bash that runs nothing: what matters is what the audit says of the command)
const bash = Tool.make({
  name: "bash",
  description: "Runs a command.",
  parameters: Schema.Struct({ command: Schema.String }),
  handler: () => Effect.succeed("ok")
})

describe("Attack29: the model's own words cut inside one of the process's own secrets", () => {
  it.effect("SandboxAudit's record and note of a long command: none of the key", () =>
    Effect.gen(function*() {
      // (the key 190 characters into each command: the record's cut at 200 keeps 10 of it)
      const plain = `echo ${"x".repeat(185)}${KEY} done`
      const risky = `pip install ${"x".repeat(178)}${KEY} done`
      const o = yield* H.run({
        input: "check it",
        tools: [bash],
        script: [
          { toolCalls: [{ name: "bash", args: { command: plain } }] },
          { toolCalls: [{ name: "bash", args: { command: risky } }] },
          "Done."
        ],
        middlewares: () => [SandboxAudit.layer()]
      })
      const records = customs(o, "sandbox_audit")
      assert.lengthOf(records, 2)
      for (const record of records) assert.include(record.command, "x[redacted]", "masked, then cut")
      assert.deepStrictEqual(records.map((r) => r.verdict), ["pass", "warn"])
      assert.notInclude(JSON.stringify(records), START, "the audit records streamed")
      const note = JSON.stringify(o.requests.at(-1)!.messages.at(-1))
      assert.include(note, "medium-risk command", "the model read the note")
      assert.notInclude(note, START, "what the model read")
    }).pipe(processSecrets, H.withStore))

  it.effect("SubagentLimit's description of a dropped call by its prompt: none of the key", () =>
    Effect.gen(function*() {
      const runner: SubagentRunner.Service = {
        types: [{ name: "general-purpose", description: "does things" }],
        run: () => Effect.succeed({ status: "completed", result: "done" })
      }
      // (the key 70 characters into the prompt: its cut at 80 keeps 10 of it)
      const prompt = `${"x".repeat(70)}${KEY} then report`
      const task = (id: string) => ({ id, name: "task", args: { prompt, subagent_type: "general-purpose" } })
      const o = yield* H.run({
        input: "delegate",
        script: [{ toolCalls: [task("t1"), task("t2")] }, "Done."],
        middlewares: () => [DurableContext.layer(), SubagentLimit.layer({ runner, maxConcurrent: 1, maxTotal: 5 })]
      })
      const [report] = customs(o, "subagent_limit")
      assert.include(report.message, "x[redacted]", "masked, then cut")
      assert.notInclude(report.message, START, "the event")
      const told = o.requests[1]!.messages.filter((m) => m.name === "subagent_limit")
      assert.lengthOf(told, 1)
      assert.notInclude(JSON.stringify(told), START, "what the model read")
    }).pipe(processSecrets, H.withStore))

  it.effect("a subagent's answer cut to its brief: the ledger and the result's metadata keep none of the key", () =>
    Effect.gen(function*() {
      // (the key 1,320 characters into the answer: the brief's head keeps 1,333)
      const result = `${"x".repeat(1320)}${KEY}${"y".repeat(3000)}`
      const runner: SubagentRunner.Service = {
        types: [{ name: "general-purpose", description: "does things" }],
        run: () => Effect.succeed({ status: "completed", result })
      }
      const args = { description: "look", prompt: "look around", subagent_type: "general-purpose" }
      const o = yield* H.run({
        input: "delegate",
        script: [{ toolCalls: [{ id: "t1", name: "task", args }] }, "Done."],
        middlewares: () => [DurableContext.layer(), SubagentLimit.layer({ runner })]
      })
      const [entry] = o.state.delegations ?? []
      assert.include(entry?.result_brief, "x[redacted]", "the ledger: masked, then cut")
      assert.notInclude(JSON.stringify(o.requests), START, "what the model read")
      assert.notInclude(JSON.stringify([o.events, o.state]), START, "what is streamed and kept")
    }).pipe(processSecrets, H.withStore))
})
