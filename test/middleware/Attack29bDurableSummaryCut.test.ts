/**
 * Attack round 29b on DurableContext's summary and one of the process's own secrets (a configured model's or tool's
 * key: `ProcessSecrets`): the summary a compaction wrote is clipped to its first two thirds and its end (6,000
 * characters) in every request, and the masks after it (the store's) find whole values only; the run's state is not
 * masked. A summary holding the key where the head's cut fell had the key's beginning read by the model.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as DurableContext from "../../src/middleware/DurableContext.js"
import { ProcessSecrets } from "../../src/services/ProcessSecrets.js"
import { ThreadStore } from "../../src/services/ThreadStore.js"
import * as M from "../../src/state/Message.js"
import * as Redact from "../../src/state/Redact.js"
import * as Harness from "../support/harness.js"

const KEY = "VAULTKEY-a29b-summary-0123456789abcdefghijklmnop"

describe("Attack29b: DurableContext's summary clipped inside one of the process's own secrets", () => {
  it.effect("the model reads none of the key", () =>
    Effect.gen(function*() {
      const store = yield* ThreadStore
      yield* store.ensure("t-summary-cut")
      // (the key 3,985 characters in: the clip's head keeps 3,996, 11 of it)
      const summary = `${"s".repeat(3985)}${KEY} was used. ${"t".repeat(3000)}`
      yield* store.append("t-summary-cut", "seed", [{ messages: [M.human("earlier")], summary_text: summary }])
      const out = yield* Harness.run({
        threadId: "t-summary-cut",
        script: ["done"],
        middlewares: () => [DurableContext.layer()],
        input: "go on"
      })
      const data = out.requests[0]!.messages.find((m) => m.id === DurableContext.DATA_ID)
      assert.isDefined(data)
      assert.include(M.text(data!), "sss", "the summary is read")
      assert.include(M.text(data!), "\n...\n", "clipped")
      assert.notInclude(M.text(data!), KEY.slice(0, 8), "the model's request")
    }).pipe(Effect.provideService(ProcessSecrets, Redact.make([KEY])), Harness.withStore))
})
