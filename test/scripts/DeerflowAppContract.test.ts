/**
 * The contract with DeerFlow's web app: each flow's HTTP sequence, recorded from the real app driven in Chromium
 * (test/fixtures/deerflow-app/<flow>.json, `npm run deerflow-app -- --record`), replayed against the gateway that
 * `antler serve` runs (a fresh one per flow, over the same SCRIPTED model the script uses), checking that every
 * call gets a status the app takes and carries the fields the app reads. The calls a flow did not reach when it was
 * recorded (an earlier call failed there) are made too, with the bodies the app sends (read in its source). Needs
 * neither the frontend nor the network.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import { makeScript } from "../../scripts/deerflow-app/model.js"
import { EXTENSIONS_CONFIG } from "../../scripts/deerflow-app/stack.js"
import * as Gateway from "../programs/gateway/support.js"
import { APP_ORIGIN, type Recording, Replay } from "./deerflowAppReplay.js"

const ROOT = Path.resolve(Path.dirname(fileURLToPath(import.meta.url)), "../..")
const FIXTURES = Path.join(ROOT, "test/fixtures/deerflow-app")

const recordings: ReadonlyArray<Recording> = Fs.readdirSync(FIXTURES)
  .filter((f) => f.endsWith(".json"))
  .sort()
  .map((f) => JSON.parse(Fs.readFileSync(Path.join(FIXTURES, f), "utf8")) as Recording)

/**
 * A gateway as the script runs it: its config file and `extensions_config.json` in its own home (what the settings
 * screens write goes there), DeerFlow's local accounts on for the flows recorded with them.
 */
const startGateway = (recording: Recording) => {
  const home = Gateway.tempDir("antler-dfapp-")
  Fs.writeFileSync(Path.join(home, "extensions_config.json"), EXTENSIONS_CONFIG)
  return Gateway.start({
    script: makeScript(),
    home,
    source: Path.join(home, "config.yaml"),
    config: {
      skills: { path: Path.join(ROOT, "test/fixtures/deerflow/skills") },
      memory: { enabled: true, backend_config: { debounce_seconds: 1 } },
      gateway: {
        heartbeat_seconds: 1,
        cors: { allow_origins: [APP_ORIGIN] },
        ...(recording.auth === "enabled" ? { auth: { accounts: true } } : {})
      }
    }
  })
}

describe("DeerFlow's web app against the gateway (recorded flows)", () => {
  it("has a recording of every flow", () => {
    assert.sameMembers(recordings.map((r) => r.flow), [
      "new-chat",
      "reload",
      "stop",
      "regenerate",
      "edit-regenerate",
      "branch",
      "upload-artifact",
      "settings-memory",
      "settings-agents",
      "settings-skills",
      "settings-mcp",
      "scheduled-tasks",
      "login"
    ])
  })

  for (const recording of recordings) {
    it(recording.flow, async () => {
      const gateway = await startGateway(recording)
      try {
        const problems = await new Replay(gateway.url).run(recording)
        assert.deepStrictEqual(problems, [], `${recording.flow}:\n  ${problems.join("\n  ")}`)
      } finally {
        await gateway.stop()
      }
    }, 120_000)
  }
})
