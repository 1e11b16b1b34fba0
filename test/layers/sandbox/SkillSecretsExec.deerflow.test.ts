/**
 * A command given request-scoped secrets (DeerFlow's `TestLocalSandboxEnvInjection`, `TestEndToEndRealSubprocess`),
 * on the real local sandbox (bash on the host here, so that it runs wherever the suite does): the variables reach
 * the command and no later one; the values are masked in its result and in the output shown as it comes, even when
 * a value is written across two pieces of a line longer than the line buffer; Antler's own environment never
 * reaches it.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as LocalSandbox from "../../../src/layers/LocalSandbox.js"
import { AppConfigService, defaults } from "../../../src/services/AppConfig.js"
import * as SkillSecrets from "../../../src/services/SkillSecrets.js"
import { tempDirs } from "../../support/fixtures.js"

const tempDir = tempDirs()
const SECRET = "sk-erp-9f3c-DO-NOT-LEAK-0123456789"

const sandboxOf = () => {
  const base = defaults()
  const app = AppConfigService.of({
    config: { ...base, sandbox: { ...base.sandbox, allow_host_bash: true } },
    source: undefined,
    home: tempDir("antler-secrets-exec-"),
    ignored: []
  })
  return LocalSandbox.make(app, { bwrap: "off" }).acquire("t1", "u1")
}

describe("a command given secrets", () => {
  it.live("gets them as variables, masked in its result and in what it shows; the next command has none", () =>
    Effect.gen(function*() {
      const sandbox = yield* sandboxOf()
      process.env.ANTLER_TEST_PLATFORM_KEY = "sk-platform-should-not-leak"
      const shown: Array<string> = []
      const env = { ERP_TOKEN: SECRET }
      // a line of 4,090 characters, then the secret's first 10 and, a moment later, the rest: the line buffer
      // passes the first part on before the second comes
      const command = "printf 'a%.0s' $(seq 1 4090); printf '%s' \"${ERP_TOKEN:0:10}\"; sleep 0.3; " +
        "printf '%s\\n' \"${ERP_TOKEN:10}\"; echo \"[$ERP_TOKEN]\"; printf '%s' \"$ERP_TOKEN\" | rev; echo; " +
        "echo \"platform:[$ANTLER_TEST_PLATFORM_KEY]\""
      const result = yield* sandbox.exec(command, {
        env,
        masked: SkillSecrets.maskedTexts(Object.values(env)),
        onOutput: (text) => void shown.push(text)
      })
      delete process.env.ANTLER_TEST_PLATFORM_KEY
      assert.strictEqual(result.exitCode, 0, result.output)
      assert.include(result.output, `${"a".repeat(4090)}[redacted]\n[[redacted]]\n`)
      assert.include(result.output, [...SECRET].reverse().join(""))
      assert.include(result.output, "platform:[]")
      assert.notInclude(result.output, SECRET)
      assert.isAbove(shown.length, 1)
      // no piece holds a part of the value long enough to be one: the value comes whole, as [redacted]
      const all = shown.join("")
      assert.notInclude(all, SECRET.slice(0, 10))
      assert.include(all, "[[redacted]]")
      const later = yield* sandbox.exec("echo \"[$ERP_TOKEN]\"")
      assert.strictEqual(later.output, "[]\n")
    }))
})
