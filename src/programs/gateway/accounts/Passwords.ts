/**
 * Account passwords: what a new one must be (DeerFlow's rule: at least 8 characters, not one of the most common;
 * here also at most 256, since the key derivation reads all of it), and how one is kept: scrypt (node:crypto)
 * with a random salt, stored as `scrypt$N$r$p$salt$key` (base64url), so that the cost can be raised later
 * and old hashes still verify. Verification compares in constant time; a hash that is not one of ours never
 * verifies.
 */
import * as Effect from "effect/Effect"
import * as Crypto from "node:crypto"

/** The shortest and longest password accepted. */
export const MIN_LENGTH = 8
export const MAX_LENGTH = 256

/** scrypt's cost: N (CPU and memory), r (block size), p (parallelism); about 32 MiB and 50-100 ms a hash. */
const N = 32768
const R = 8
const P = 1
const KEY_BYTES = 32
const SALT_BYTES = 16
/** The most memory a verification may ask scrypt for (a stored hash names its own cost). */
const MAX_MEMORY = 64 * 1024 * 1024

/** The most common passwords of 8 characters or more (a lower bound, as DeerFlow's list is). */
const COMMON: ReadonlySet<string> = new Set([
  "password", "password1", "password12", "password123", "password1234", "12345678", "123456789", "1234567890",
  "qwerty12", "qwertyui", "qwerty123", "abc12345", "abcd1234", "iloveyou", "letmein1", "welcome1", "welcome123",
  "admin123", "administrator", "passw0rd", "p@ssw0rd", "monkey12", "trustno1", "sunshine", "princess",
  "football", "baseball", "superman", "batman123", "starwars", "dragon123", "master123", "shadow12", "michael1",
  "jennifer", "computer", "11111111", "00000000", "88888888", "qwertyuiop", "1q2w3e4r", "asdfghjk"
])

/** Why a password cannot be a new one, if it cannot. */
export const weakness = (password: string): string | undefined => {
  if (password.length < MIN_LENGTH) return `The password must be at least ${MIN_LENGTH} characters long.`
  if (password.length > MAX_LENGTH) return `The password must be at most ${MAX_LENGTH} characters long.`
  if (COMMON.has(password.toLowerCase())) return "Password is too common; choose a stronger password."
  return undefined
}

const derive = (password: string, salt: Buffer, n: number, r: number, p: number, bytes: number) =>
  Effect.async<Buffer, Error>((resume) => {
    Crypto.scrypt(password.normalize("NFC"), salt, bytes, { N: n, r, p, maxmem: MAX_MEMORY }, (error, key) =>
      resume(error === null ? Effect.succeed(key) : Effect.fail(error)))
  })

/** A new hash of `password`, with a fresh salt. */
export const hash = (password: string): Effect.Effect<string> =>
  Effect.gen(function*() {
    const salt = Crypto.randomBytes(SALT_BYTES)
    const key = yield* Effect.orDie(derive(password, salt, N, R, P, KEY_BYTES))
    return ["scrypt", N, R, P, salt.toString("base64url"), key.toString("base64url")].join("$")
  })

const HASH = /^scrypt\$(\d{1,7})\$(\d{1,2})\$(\d{1,2})\$([A-Za-z0-9_-]{16,64})\$([A-Za-z0-9_-]{16,128})$/

/** Whether `password` is the one `stored` was made from. */
export const verify = (password: string, stored: string): Effect.Effect<boolean> => {
  const match = HASH.exec(stored)
  if (match === null || password.length > MAX_LENGTH) return Effect.succeed(false)
  const [n, r, p] = [Number(match[1]), Number(match[2]), Number(match[3])]
  const expected = Buffer.from(match[5]!, "base64url")
  return derive(password, Buffer.from(match[4]!, "base64url"), n, r, p, expected.length).pipe(
    Effect.map((key) => Crypto.timingSafeEqual(key, expected)),
    Effect.orElseSucceed(() => false)
  )
}

/** A hash no password verifies against, with the usual cost: what an unknown email is checked against. */
export const decoy = (): Effect.Effect<string> => hash(Crypto.randomBytes(24).toString("base64url"))
