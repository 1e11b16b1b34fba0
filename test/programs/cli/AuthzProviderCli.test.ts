/**
 * `antler run` with an operator's own authorization provider module (DeerFlow's `authorization.provider.use`) that
 * cannot be used: the run stops before anything runs, with exit code 2 and the file, the key and why.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { childEnv, runAntler } from "../../support/cli.js"
import { tempDir } from "../../support/fixtures.js"

const config = (use: string) =>
  "models:\n  - name: main\n    model: gpt-4o\n    base_url: http://127.0.0.1:9/v1\n    api_key: sk-unused-0000\n" +
  `authorization:\n  enabled: true\n  provider:\n    use: ${JSON.stringify(use)}\n`

describe("antler run with an authorization provider module", () => {
  it("a missing module or an export without authorize exits 2, naming the file, the key and why", async () => {
    const dir = tempDir("antler-authz-cli-")
    const file = Path.join(dir, "config.yaml")
    Fs.writeFileSync(Path.join(dir, "book.mjs"), "export const Book = () => ({ evaluate: () => ({ allow: true }) })\n")
    const env = childEnv({ ANTLER_HOME: Path.join(dir, "home") })

    Fs.writeFileSync(file, config("./nowhere.mjs:Book"))
    const missing = await runAntler(["run", "--config", file, "hello"], { cwd: dir, env })
    assert.strictEqual(missing.code, 2, missing.stderr)
    assert.include(missing.stderr, `${file}: authorization.provider.use: "./nowhere.mjs:Book": no module at`)
    assert.strictEqual(missing.stdout, "")

    Fs.writeFileSync(file, config("./book.mjs:Book"))
    const wrong = await runAntler(["run", "--config", file, "hello"], { cwd: dir, env })
    assert.strictEqual(wrong.code, 2, wrong.stderr)
    assert.include(wrong.stderr, "is not an authorization provider: it gave an object without an authorize method")
  }, 120_000)
})
