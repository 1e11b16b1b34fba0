/**
 * A run's request secrets (`context.secrets`) as they travel between the runners of a cluster: sealed with a key only
 * the cluster's processes have (derived from `gateway.cluster.secret`, which never leaves their configuration), so
 * neither the runners' sockets nor PostgreSQL, where a run's durable message waits until its end (and from which the
 * thread's next runner resumes it), ever hold them in plain text. AES-256-GCM, a fresh nonce each time, bound to the
 * run: its user, thread and id (a sealed value moved to another user's request, or to another run of the same thread,
 * does not open; the thread's next runner resuming the run, under its id, opens it).
 */
import * as Either from "effect/Either"
import * as Redacted from "effect/Redacted"
import * as Crypto from "node:crypto"
import * as SkillSecrets from "../../../services/SkillSecrets.js"

/** What a sealed value starts with (its format's version). */
const PREFIX = "antler-sealed-v1."
const NONCE_BYTES = 12
const TAG_BYTES = 16

/** The key of the cluster's sealed secrets, from its shared secret (HKDF-SHA256, a label of its own). */
const keyOf = (clusterSecret: Redacted.Redacted<string>): Buffer =>
  Buffer.from(Crypto.hkdfSync("sha256", Redacted.value(clusterSecret), "antler", "antler/request-secrets/v1", 32))

/** The run a sealed value is for. */
export interface Owner {
  readonly userId: string
  readonly threadId: string
  readonly runId: string
}

const boundTo = (owner: Owner) =>
  Buffer.from(`${owner.userId}\u0000${owner.threadId}\u0000${owner.runId}`, "utf8")

/** `secrets` sealed for the run of `owner` (see the module's header). */
export const seal = (
  clusterSecret: Redacted.Redacted<string>,
  owner: Owner,
  secrets: SkillSecrets.RequestSecrets
): string => {
  const nonce = Crypto.randomBytes(NONCE_BYTES)
  const cipher = Crypto.createCipheriv("aes-256-gcm", keyOf(clusterSecret), nonce)
  cipher.setAAD(boundTo(owner))
  const plain = Buffer.from(JSON.stringify(Object.fromEntries(SkillSecrets.entries(secrets))), "utf8")
  const sealed = Buffer.concat([cipher.update(plain), cipher.final()])
  return PREFIX + Buffer.concat([nonce, cipher.getAuthTag(), sealed]).toString("base64url")
}

/**
 * The secrets `sealed` holds for the run `owner`, decoded as a request's (`SkillSecrets.decodeRequest`). One that is
 * not a sealed value, was sealed under another cluster secret or for another run (another user's, thread's, or one
 * of the same thread), or was changed, is a refusal saying so (never a value).
 */
export const open = (
  clusterSecret: Redacted.Redacted<string>,
  owner: Owner,
  sealed: unknown
): Either.Either<SkillSecrets.RequestSecrets | undefined, string> => {
  if (typeof sealed !== "string" || !sealed.startsWith(PREFIX)) {
    return Either.left("the run's secrets did not come sealed")
  }
  const bytes = Buffer.from(sealed.slice(PREFIX.length), "base64url")
  if (bytes.length < NONCE_BYTES + TAG_BYTES) return Either.left("the run's sealed secrets are cut short")
  try {
    const decipher = Crypto.createDecipheriv("aes-256-gcm", keyOf(clusterSecret), bytes.subarray(0, NONCE_BYTES))
    decipher.setAAD(boundTo(owner))
    decipher.setAuthTag(bytes.subarray(NONCE_BYTES, NONCE_BYTES + TAG_BYTES))
    const plain = Buffer.concat([decipher.update(bytes.subarray(NONCE_BYTES + TAG_BYTES)), decipher.final()])
    return SkillSecrets.decodeRequest(JSON.parse(plain.toString("utf8")), "the run's sealed secrets")
  } catch {
    return Either.left(
      "the run's sealed secrets do not open here: they were sealed under another gateway.cluster.secret (every " +
        "runner must have the same), for another run, or changed on the way"
    )
  }
}

/** A sealed value's field in a run request as it travels (see `ClusterRuns`). */
export const FIELD = "sealedSecrets"
