/**
 * A run's sealed request secrets in a cluster (`SealedSecrets`) are bound to the run, not only to its user and thread:
 * before, a value sealed for one run (in its durable message in PostgreSQL) opened for another run of the same
 * thread, so whoever could write the cluster's messages could hand run A's secrets to run B. Now it opens only for
 * the run it was sealed for (the next runner resuming that run, under its id, still opens it).
 */
import { assert, describe, it } from "@effect/vitest"
import * as Either from "effect/Either"
import * as Redacted from "effect/Redacted"
import * as SealedSecrets from "../../../src/programs/gateway/cluster/SealedSecrets.js"
import type * as SkillSecrets from "../../../src/services/SkillSecrets.js"

const VALUE = "erp-token-value-of-run-a-0123456789"
const key = Redacted.make("the-cluster-secret-0123456789abcdef")
const given = Redacted.make(new Map([["ERP_TOKEN", VALUE]])) as SkillSecrets.RequestSecrets

describe("SealedSecrets: bound to the run", () => {
  it("a value sealed for run A opens for run A, and not for run B of the same user and thread", () => {
    const runA = { userId: "alice", threadId: "t1", runId: "run-a" }
    const sealed = SealedSecrets.seal(key, runA, given)
    assert.isTrue(Either.isRight(SealedSecrets.open(key, { ...runA }, sealed)), "the run it was sealed for")
    const refused = SealedSecrets.open(key, { ...runA, runId: "run-b" }, sealed)
    assert.isTrue(Either.isLeft(refused), "another run of the same thread")
    if (Either.isLeft(refused)) {
      assert.include(refused.left, "another run")
      assert.notInclude(refused.left, VALUE)
    }
  })
})
