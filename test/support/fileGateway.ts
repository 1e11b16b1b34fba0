/**
 * The one gateway of a test file (the attack tests' start-up): started before its tests, stopped after them, and
 * alice's and bob's requests to it.
 */
import { afterAll, beforeAll } from "@effect/vitest"
import type { TestGateway } from "../programs/gateway/support.js"
import * as Support from "../programs/gateway/support.js"
import * as Requests from "./requests.js"

/** The gateway `start` makes (within `timeoutMs`) for the tests of the current file or `describe`. */
export const fileGateway = (start: () => Promise<TestGateway>, timeoutMs?: number) => {
  let gateway: TestGateway | undefined
  beforeAll(async () => {
    gateway = await start()
  }, timeoutMs)
  afterAll(() => gateway?.stop())
  const current = () => gateway!
  return {
    gateway: current,
    alice: Requests.as(current, Support.ALICE),
    bob: Requests.as(current, Support.BOB)
  }
}
