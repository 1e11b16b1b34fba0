/**
 * Attack round 28, as a gateway user driving their own run's model: a copy of a thread (`POST /threads/{id}/copy`, a
 * branch too) may be made while a run of it goes on, and the run's bash swaps a file of its outputs for a link (a
 * relative target, `../../../../../alice/memory.json`). The copy looked at each file, then opened its path again to
 * copy it, following the link swapped in meanwhile: bob's copy held alice's memory. A file is now copied from what
 * was opened where the walk found it, without following a link. The swap is made as the copy opens the file (its
 * `copyFile` or `open` called for it), as a concurrent command makes it at any moment.
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

// `node:fs/promises`, its `copyFile` and `open` wrapped to run `swapAt.swap` before opening a path of `swapAt`
const promises = createRequire(import.meta.url)("node:fs/promises") as typeof Fs.promises
const { copyFile, open } = promises
let swapAt: LinkSwap | undefined
const swapFirst = (path: unknown) => {
  if (swapAt !== undefined && String(path) === swapAt.path) {
    swapAt.swap()
    swapAt = undefined
  }
}

beforeAll(async () => {
  promises.copyFile = ((source: Fs.PathLike, ...rest: Array<never>) => {
    swapFirst(source)
    return (copyFile as (...args: Array<unknown>) => Promise<void>)(source, ...rest)
  }) as typeof copyFile
  promises.open = ((path: Fs.PathLike, ...rest: Array<never>) => {
    swapFirst(path)
    return (open as (...args: Array<unknown>) => Promise<Fs.promises.FileHandle>)(path, ...rest)
  }) as typeof open
  syncBuiltinESMExports()
  gateway = await Support.start({ script: () => "Done.", config: { gateway: Support.twoUsers } })
})
afterAll(async () => {
  Object.assign(promises, { copyFile, open })
  syncBuiltinESMExports()
  await gateway?.stop()
})

describe("a file of a thread swapped for a link as the thread is copied", () => {
  it("is left out of the copy: another user's memory stays theirs", async () => {
    const fact = await alice("POST", "/api/memory/facts", { content: "ALICE-PRIVATE: her bank is Foo" })
    assert.strictEqual(fact.status, 200, fact.text)
    const outputs = await uploadedOutputs(bob, gateway.home, "bob", "b-thread")
    const report = Path.join(outputs, "report.txt")
    Fs.writeFileSync(report, "bob's report")
    Fs.writeFileSync(Path.join(outputs, "kept.txt"), "kept")
    const aliceMemory = Path.join(gateway.home, "users", "alice", "memory.json")

    const link = swapForLink(report, aliceMemory)
    swapAt = link
    const copied = await bob("POST", "/threads/b-thread/copy", {})
    assert.strictEqual(copied.status, 200, copied.text)
    assert.isTrue(link.swapped())
    const copy = copied.json().thread_id
    const read = async (name: string) =>
      bob("GET", `/api/threads/${copy}/artifacts/mnt/user-data/outputs/${name}`)
    assert.strictEqual((await read("kept.txt")).text, "kept")
    const swappedCopy = await read("report.txt")
    assert.notInclude(swappedCopy.text, "ALICE-PRIVATE")
    assert.strictEqual(swappedCopy.status, 404, swappedCopy.text)
  })
})
