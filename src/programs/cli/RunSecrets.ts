/**
 * `antler run --secret NAME`: the request-scoped secrets of a CLI run (the gateway's `context.secrets`), each named
 * on the command line and its value read from Antler's environment (`$NAME`), so that no value is ever an argument
 * a process list shows. The values then go where a gateway run's go (`RunOptions.secrets`: the `bash` commands of
 * the skills in use that declare them, an MCP server's `${secret:NAME}`) and are hidden from what the run prints,
 * logs and stores.
 */
import * as Either from "effect/Either"
import * as SkillSecrets from "../../services/SkillSecrets.js"

/** Where a refusal says the secrets came from. */
const WHERE = "--secret"

/**
 * The secrets `names` give (`--secret NAME`, repeated), their values `$NAME` of `env`: none when `names` is empty. A
 * refusal says what was wrong, never a value: a `NAME=...` (a value on the command line: the process list shows it,
 * so it is refused rather than used), a name that is not an environment variable's, one unset or empty in `env`,
 * and what `SkillSecrets.decodeRequest` refuses (sizes, NUL, how many). `antler`: how the command a refusal suggests
 * is typed where the user is (`CliCommand.invocation`).
 */
export const fromEnvironment = (
  names: ReadonlyArray<string>,
  env: Readonly<Record<string, string | undefined>>,
  antler = "antler"
): Either.Either<SkillSecrets.RequestSecrets | undefined, string> => {
  const values: Record<string, string> = {}
  for (const given of names) {
    const equals = given.indexOf("=")
    if (equals >= 0) {
      const name = given.slice(0, equals)
      const shown = SkillSecrets.NAME.test(name) ? name : "NAME"
      return Either.left(
        `${WHERE} takes a name, never a value (a value on the command line is visible to every user in the process ` +
          `list): set it in the environment and name it, e.g. ${shown}=... ${antler} run --secret ${shown} "<prompt>"`
      )
    }
    if (!SkillSecrets.NAME.test(given) || given.length > SkillSecrets.MAX_NAME_CHARS) {
      const shown = given.length > 64 ? `${JSON.stringify(given.slice(0, 64))}...` : JSON.stringify(given)
      return Either.left(
        `${WHERE} ${shown} is not a valid secret name (an environment variable name: letters, digits and _, not ` +
          `starting with a digit, at most ${SkillSecrets.MAX_NAME_CHARS} characters)`
      )
    }
    const value = env[given]
    if (value === undefined || value === "") {
      return Either.left(`${WHERE} ${given}: $${given} is not set in the environment (its value is read from there)`)
    }
    values[given] = value
  }
  return SkillSecrets.decodeRequest(names.length === 0 ? undefined : values, WHERE)
}
