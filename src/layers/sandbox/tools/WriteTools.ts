/** The tools that change files: `write_file` and `str_replace` (each under the file's lock). */
import * as Effect from "effect/Effect"
import type { SandboxConfig } from "../../../services/AppConfig.js"
import type { SandboxError } from "../../../services/Sandbox.js"
import * as Tool from "../../../services/Tool.js"
import { StrReplaceArgs, WriteFileArgs } from "./Args.js"
import { asFileLineEnds, countOccurrences, normalizeVirtual, replaceLiteral } from "./Text.js"
import * as Texts from "./Texts.js"
import type { ToolContext } from "./ToolContext.js"
import { errorText } from "./ToolContext.js"
import { headChars } from "../../../state/Chars.js"

const WRITE_ERROR_MAX_CHARS = 2000

/**
 * A failed write as DeerFlow's `write_file` words it (`Permission denied writing to file: P`, `Failed to write file
 * 'P': ...`); a path refused as outside the sandbox or read-only, and a write over one of Antler's limits (the file
 * size, the disk quota), keep Antler's sentence, which says what to do instead.
 */
const writeErrorText = (e: SandboxError, shown: string): string => {
  const path = e.path ?? shown
  switch (e.reason) {
    case "path_escape":
    case "read_only":
    case "is_directory":
    case "too_large":
    case "quota":
      return errorText(e)
    case "permission":
      return e.message.startsWith("Permission denied")
        ? `Error: Permission denied writing to file: ${path}`
        : errorText(e)
    default:
      return `Error: Failed to write file '${path}': ${e.message}`
  }
}

/**
 * What `write_file` does otherwise than DeerFlow's description says, after it: the cap, when not DeerFlow's 80 KB,
 * and that it holds for appends too (DeerFlow's does not); the size a file may grow to.
 */
export const writeLimits = (settings: SandboxConfig): string =>
  (settings.write_file_max_bytes > 0
    ? `Here the cap is ${settings.write_file_max_bytes} bytes and holds for append=True calls too: split a long ` +
      "append into several."
    : "Here no cap is set.") +
  (settings.max_file_size_mb > 0 ? ` A file may grow to at most ${settings.max_file_size_mb} MB.` : "")

/** The `write_file` tool. */
export const writeFile = ({ settings, withSandbox }: ToolContext) =>
  Tool.make({
    name: "write_file",
    description: `${Texts.WRITE_FILE_DESCRIPTION}\n\n${writeLimits(settings)}`,
    parameters: WriteFileArgs,
    handler: (args, call) =>
      withSandbox("write_file", (sandbox) => {
        const max = settings.write_file_max_bytes
        const bytes = Buffer.byteLength(args.content, "utf8")
        if (max > 0 && bytes > max) {
          // DeerFlow's sentence (test_write_file_tool_size_guard); an append over the cap (which DeerFlow lets
          // through) is refused in the same words, asking for smaller appends
          return Effect.succeed(
            `Error: write_file content (${bytes} bytes) exceeds the ${max}-byte single-call limit. Split the ` +
              "content into smaller pieces: " + (args.append
                ? `call write_file with append=True once for each piece, each under ${max} bytes.`
                : "either (a) write the first section now, then use `str_replace` for further edits, or (b) call " +
                  "write_file again with append=True carrying the next section.")
          )
        }
        return sandbox.withFileLock(args.path, sandbox.writeText(args.path, args.content, args.append)).pipe(
          Effect.as("OK"),
          Effect.catchAll((e) =>
            Effect.succeed(headChars(writeErrorText(e, sandbox.mask(args.path)), WRITE_ERROR_MAX_CHARS))
          )
        )
      })(call)
  })

/** The `str_replace` tool. */
export const strReplace = ({ withSandbox }: ToolContext) =>
  Tool.make({
    name: "str_replace",
    description: Texts.STR_REPLACE_DESCRIPTION,
    parameters: StrReplaceArgs,
    handler: (args, call) =>
      withSandbox("str_replace", (sandbox) => {
        const path = sandbox.mask(normalizeVirtual(args.path))
        if (args.old_str === "") return Effect.succeed("Error: old_str is empty; give the exact text to replace.")
        return sandbox.withFileLock(
          args.path,
          Effect.gen(function*() {
            const content = yield* sandbox.readText(args.path)
            const { newStr, oldStr } = asFileLineEnds(content, args.old_str, args.new_str)
            const count = countOccurrences(content, oldStr)
            if (count === 0) return `Error: String to replace not found in file: ${path}`
            if (count > 1 && !args.replace_all) {
              return `Error: old_str occurs ${count} times in ${path}, so the edit is ambiguous. Include more ` +
                `surrounding text so it matches exactly once, or set replace_all=true to replace all ${count}.`
            }
            yield* sandbox.writeText(args.path, replaceLiteral(content, oldStr, newStr, args.replace_all))
            return count === 1 ? "OK" : `OK (replaced ${count} occurrences)`
          }).pipe(
            // DeerFlow's words for a file the edit may not change
            Effect.catchIf(
              (e) => e.reason === "permission" && e.message.startsWith("Permission denied"),
              (e) => Effect.succeed(`Error: Permission denied accessing file: ${e.path ?? path}`)
            )
          )
        )
      })(call)
  })
