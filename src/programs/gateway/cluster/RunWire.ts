/**
 * A run request as it travels between a cluster's runners and waits in PostgreSQL (`ClusterRuns`): its secrets sealed
 * with the runners' shared secret (`SealedSecrets`), and opened again where the run executes.
 */
import * as Either from "effect/Either"
import type * as Redacted from "effect/Redacted"
import type * as Runs from "../Runs.js"
import * as SealedSecrets from "./SealedSecrets.js"

/**
 * A run request as it travels between runners (`Start`) and waits in PostgreSQL (`Execute`): its secrets sealed
 * (`SealedSecrets`, with the runners' shared secret; the gateway refuses them without one), never in plain text.
 */
export const wire = (
  clusterSecret: Redacted.Redacted<string> | undefined,
  request: Runs.RunRequest,
  runId: string
): unknown => {
  const { secrets, ...rest } = request
  if (secrets === undefined) return rest
  if (clusterSecret === undefined) throw new Error("a run's secrets reached a cluster without gateway.cluster.secret")
  return { ...rest, [SealedSecrets.FIELD]: SealedSecrets.seal(clusterSecret, { ...request, runId }, secrets) }
}

/**
 * A run request of the run `runId` as it came from another runner or the database (`wire`): its secrets opened, or
 * why they do not (sealed for another run among them).
 */
export const unwire = (
  clusterSecret: Redacted.Redacted<string> | undefined,
  raw: unknown,
  runId: string | undefined
): Either.Either<Runs.RunRequest, { readonly request: Runs.RunRequest; readonly problem: string }> => {
  const { [SealedSecrets.FIELD]: sealed, secrets: _, ...request } = raw as Runs.RunRequest & Record<string, unknown>
  if (sealed === undefined) return Either.right(request)
  const opened = clusterSecret === undefined
    ? Either.left("this runner has no gateway.cluster.secret to open the run's sealed secrets with")
    : runId === undefined
    ? Either.left("the run's sealed secrets came without the run's id")
    : SealedSecrets.open(clusterSecret, { ...request, runId }, sealed)
  return Either.match(opened, {
    onLeft: (problem) => Either.left({ request, problem }),
    onRight: (secrets) => Either.right(secrets === undefined ? request : { ...request, secrets })
  })
}
