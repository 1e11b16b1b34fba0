/** The tools that change files: `write_file` and `str_replace` (each under the file's lock). */
import * as Effect from "effect/Effect"
import * as Tool from "../../../services/Tool.js"
import { StrReplaceArgs, WriteFileArgs } from "./Args.js"
import { countOccurrences, normalizeVirtual, replaceLiteral } from "./Text.js"
import type { ToolContext } from "./ToolContext.js"
import { errorText } from "./ToolContext.js"
import { headChars } from "../../../state/Chars.js"

const WRITE_ERROR_MAX_CHARS = 2000

/** The `write_file` tool. */
export const writeFile = ({ settings, withSandbox }: ToolContext) =>
  Tool.make({
    name: "write_file",
    description: "Write a text file, creating parent directories; with append=true, add to its end instead. " +
      (settings.write_file_max_bytes > 0
        ? `One call writes at most ${settings.write_file_max_bytes} bytes: write a large file as a first ` +
          "section, then add the rest in further calls with append=true, or edit with str_replace."
        : "") +
      (settings.max_file_size_mb > 0 ? ` A file may grow to at most ${settings.max_file_size_mb} MB.` : ""),
    parameters: WriteFileArgs,
    handler: (args, call) =>
      withSandbox("write_file", (sandbox) => {
        const max = settings.write_file_max_bytes
        const bytes = Buffer.byteLength(args.content, "utf8")
        if (max > 0 && bytes > max) {
          return Effect.succeed(
            args.append
              ? `Error: The content is ${bytes} bytes, over the ${max}-byte limit for one write (appends ` +
                `included). Add it in several calls with append=true, each under ${max} bytes.`
              : `Error: The content is ${bytes} bytes, over the ${max}-byte limit for one write. Write the first ` +
                `section (under ${max} bytes) with write_file, then add the rest in chunks with append=true, ` +
                "or make targeted edits with str_replace."
          )
        }
        return sandbox.withFileLock(args.path, sandbox.writeText(args.path, args.content, args.append)).pipe(
          Effect.as("OK"),
          Effect.catchAll((e) => Effect.succeed(headChars(errorText(e), WRITE_ERROR_MAX_CHARS)))
        )
      })(call)
  })

/** The `str_replace` tool. */
export const strReplace = ({ withSandbox }: ToolContext) =>
  Tool.make({
    name: "str_replace",
    description: "Replace text in a file. old_str must occur exactly once (include enough surrounding lines to " +
      "make it unique), unless replace_all=true, which replaces every occurrence.",
    parameters: StrReplaceArgs,
    handler: (args, call) =>
      withSandbox("str_replace", (sandbox) => {
        const path = sandbox.mask(normalizeVirtual(args.path))
        if (args.old_str === "") return Effect.succeed("Error: old_str is empty; give the exact text to replace.")
        return sandbox.withFileLock(
          args.path,
          Effect.gen(function*() {
            const content = yield* sandbox.readText(args.path)
            const count = countOccurrences(content, args.old_str)
            if (count === 0) return `Error: String to replace not found in file: ${path}`
            if (count > 1 && !args.replace_all) {
              return `Error: old_str occurs ${count} times in ${path}, so the edit is ambiguous. Include more ` +
                `surrounding text so it matches exactly once, or set replace_all=true to replace all ${count}.`
            }
            yield* sandbox.writeText(args.path, replaceLiteral(content, args.old_str, args.new_str, args.replace_all))
            return count === 1 ? "OK" : `OK (replaced ${count} occurrences)`
          })
        )
      })(call)
  })
