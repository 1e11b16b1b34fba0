/**
 * Attack round 28, as a gateway user driving their own run's model: the model's bash swaps a file of the thread's
 * outputs for a link (a relative target, `../../../../../alice/memory.json`) while the user asks for the artifact. The
 * gateway resolved the path (a file then, inside the thread) and then opened the path again to read it, following the
 * link swapped in meanwhile: bob read alice's memory (or `config.yaml`, or any file of the gateway's user). The
 * artifact is now read from the file opened at the path resolved, without following a link. The swap is made at the
 * moment the sandbox has resolved the path (its `realpath` answered), as a concurrent command makes it at any moment.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Fs from "node:fs"
import { createRequire, syncBuiltinESMExports } from "node:module"
import * as Path from "node:path"
import type { LinkSwap } from "../../support/linkSwap.js"
import { swapForLink, uploadedOutputs } from "../../support/linkSwap.js"
import * as Requests from "../../support/requests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

let gateway: TestGateway
const alice = Requests.as(() => gateway, Support.ALICE)
const bob = Requests.as(() => gateway, Support.BOB)

// `node:fs/promises` as the sandbox's resolution reads it: its `realpath`, wrapped to run `swap` once it answered for
// a path of `swapAt`
const promises = createRequire(import.meta.url)("node:fs/promises") as typeof Fs.promises
const realpath = promises.realpath
let swapAt: LinkSwap | undefined

beforeAll(async () => {
  promises.realpath = (async (...args: Parameters<typeof realpath>) => {
    const answer = await realpath(...args)
    if (swapAt !== undefined && answer === swapAt.path) {
      swapAt.swap()
      swapAt = undefined
    }
    return answer
  }) as typeof realpath
  syncBuiltinESMExports()
  gateway = await Support.start({ script: () => "Done.", config: { gateway: Support.twoUsers } })
})
afterAll(async () => {
  promises.realpath = realpath
  syncBuiltinESMExports()
  await gateway?.stop()
})

describe("an artifact swapped for a link once its path was resolved", () => {
  it("is not read through the link: another user's memory stays theirs", async () => {
    const fact = await alice("POST", "/api/memory/facts", { content: "ALICE-PRIVATE: her bank is Foo" })
    assert.strictEqual(fact.status, 200, fact.text)
    const outputs = await uploadedOutputs(bob, gateway.home, "bob", "b-thread")
    const report = Path.join(outputs, "report.txt")
    Fs.writeFileSync(report, "bob's report")
    const aliceMemory = Path.join(gateway.home, "users", "alice", "memory.json")
    assert.include(Fs.readFileSync(aliceMemory, "utf8"), "ALICE-PRIVATE")

    const path = "/api/threads/b-thread/artifacts/mnt/user-data/outputs/report.txt"
    assert.strictEqual((await bob("GET", path)).text, "bob's report")
    const link = swapForLink(report, aliceMemory)
    swapAt = link
    const answer = await bob("GET", path)
    assert.isTrue(link.swapped())
    assert.notInclude(answer.text, "ALICE-PRIVATE")
    assert.strictEqual(answer.status, 404, answer.text)
    assert.include(answer.json().detail, "Artifact /mnt/user-data/outputs/report.txt")
  })
})
