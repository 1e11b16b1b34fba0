/**
 * What an MCP task says back after the run that started it ended is masked as that run's own tool results were: a
 * request secret of several lines (a PEM key) is hidden line by line too (`SkillSecrets.runRedactor`), in its
 * encoded forms as well. The task's guard opened the sealed secrets and masked only each whole value, so a task
 * quoting one line of a key, or its base64, kept it in its record and its notification run.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Either from "effect/Either"
import * as Redacted from "effect/Redacted"
import * as TaskSecrets from "../../../src/programs/gateway/mcptasks/TaskSecrets.js"
import type * as SkillSecrets from "../../../src/services/SkillSecrets.js"
import * as Redact from "../../../src/state/Redact.js"
import { snapshot, taskRecord } from "../../support/mcpTaskRecords.js"

const LINE_ONE = "-----BEGIN KEY-----"
const LINE_TWO = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC-DO-NOT-LEAK"
const KEY = `${LINE_ONE}\n${LINE_TWO}\n-----END KEY-----`
const secrets = Redacted.make(new Map([["ERP_KEY", KEY]])) as SkillSecrets.RequestSecrets

describe("Secrets25b: an MCP task's answer, masked with the sealed secrets of the run that started it", () => {
  it("hides each line of a secret of several lines, and its base64, as the run's tool results did", () => {
    const key = TaskSecrets.keyOf(Redacted.make("cluster-secret-of-the-lines-test-0123"))
    const unsealed = taskRecord("task-lines")
    const task = { ...unsealed, sealed_secrets: TaskSecrets.seal(key, unsealed, secrets) }
    const guard = TaskSecrets.guardOf(key, task, Redact.none)
    assert.isTrue(Either.isRight(guard))
    const said = TaskSecrets.guarded(guard, snapshot({
      result: { body: `signed with ${LINE_TWO}`, b64: Buffer.from(LINE_TWO).toString("base64") },
      error: null
    }))
    assert.deepStrictEqual(said.result, { body: "signed with [redacted]", b64: "[redacted]" })
    assert.strictEqual(TaskSecrets.guardedText(guard, `401 for key ${LINE_TWO}`), "401 for key [redacted]")
    // (the whole value still; a line shorter than the shortest searched, none here, would stay)
    assert.notInclude(JSON.stringify(TaskSecrets.guarded(guard, snapshot({ result: { all: KEY } }))), "DO-NOT-LEAK")
  })
})
