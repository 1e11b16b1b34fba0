/** The tools that read files: `ls`, `read_file` and, for vision models, `view_image`. */
import * as Effect from "effect/Effect"
import { absoluteVirtual, OUTPUTS, UPLOADS, WORKSPACE } from "../../../services/Sandbox.js"
import * as Tool from "../../../services/Tool.js"
import type { HandlerOutput } from "../../../services/Tool.js"
import * as M from "../../../state/Message.js"
import * as ReadMark from "../../../state/ReadMark.js"
import { displayPath } from "../VirtualPaths.js"
import { LsArgs, ReadFileArgs, ViewImageArgs } from "./Args.js"
import { extensionOf, IMAGE_TYPES, MAX_IMAGE_BYTES, sniffImage } from "./Images.js"
import { isJunk, WALK_MAX_ENTRIES } from "./Listing.js"
import { headTruncate, normalizeVirtual, rangeError, selectLines, under, universalNewlines } from "./Text.js"
import * as Texts from "./Texts.js"
import type { ToolContext } from "./ToolContext.js"

/** The `ls` tool. */
export const ls = ({ gate, settings, withSandbox }: ToolContext) =>
  Tool.make({
    name: "ls",
    readOnly: true,
    description: Texts.LS_DESCRIPTION,
    parameters: LsArgs,
    handler: (args, call) =>
      withSandbox("ls", (sandbox) =>
        gate(args.path, (hidden) =>
          sandbox.walk(args.path, { maxDepth: 2, maxEntries: WALK_MAX_ENTRIES, skip: isJunk }).pipe(
            Effect.map(({ entries }) => {
              const shown = entries.filter((e) => !hidden(e.path))
              if (shown.length === 0) return "(empty)"
              const lines = shown.map((e) => (e.kind === "directory" ? `${e.path}/` : e.path)).sort()
              return headTruncate(
                lines.join("\n"),
                settings.ls_output_max_chars,
                "Use a more specific path to see fewer results"
              )
            }),
            Effect.catchIf(
              (e) => e.reason === "not_found",
              () => Effect.succeed(`Error: Directory not found: ${sandbox.mask(normalizeVirtual(args.path))}`)
            )
          )
        ))(call)
  })

/** The `read_file` tool. */
export const readFile = ({ gate, markReads, settings, withSandbox }: ToolContext) =>
  Tool.make({
    name: "read_file",
    readOnly: true,
    // its results carry the read mark of the bytes it read (ReadBeforeWrite needs no lock for them)
    marksReads: true,
    description: Texts.READ_FILE_DESCRIPTION,
    parameters: ReadFileArgs,
    handler: (args, call) =>
      withSandbox("read_file", (sandbox) =>
        gate(args.path, () => {
          // (a range wrong whatever the file holds is answered before the file is read, as DeerFlow's is)
          const wrong = rangeError(args.start_line, args.end_line)
          if (wrong !== undefined) return Effect.succeed(`(${wrong})`)
          return sandbox.readText(args.path).pipe(
            Effect.map((content): HandlerOutput => {
              let text = universalNewlines(content)
              if (args.start_line !== undefined || args.end_line !== undefined) {
                const selected = selectLines(content, args.start_line, args.end_line)
                // (DeerFlow's notes, not errors: in parentheses, as its `(empty)`)
                if ("error" in selected) return `(${selected.error})`
                text = selected.text
              }
              const output = text === "" ? "(empty)" : headTruncate(
                text,
                settings.read_file_output_max_chars,
                "Use start_line/end_line to read a specific range"
              )
              if (!markReads) return output
              // the read mark (ReadBeforeWrite) is of the whole content read here, also for a range
              const result = Tool.toResult(call, output)
              return {
                ...result,
                message: ReadMark.withMark(result.message, {
                  path: absoluteVirtual(args.path),
                  hash: ReadMark.contentHash(content)
                })
              }
            }),
            Effect.catchIf(
              (e) => e.reason === "binary",
              (e) =>
                // DeerFlow's sentence (test_read_file_tool_binary), naming the virtual path
                Effect.succeed(
                  `Error: cannot read '${e.path ?? sandbox.mask(normalizeVirtual(args.path))}' as text — it ` +
                    "appears to be a binary file (e.g. .xlsx, .pdf, or an image). read_file only supports UTF-8 " +
                    "text. Use bash with a suitable library instead (pandas/openpyxl for spreadsheets), or " +
                    "view_image for images."
                )
            )
          )
        }))(call)
  })

/** The `view_image` tool. */
export const viewImage = ({ withSandbox }: ToolContext) =>
  Tool.make({
    name: "view_image",
    readOnly: true,
    description: Texts.VIEW_IMAGE_DESCRIPTION,
    parameters: ViewImageArgs,
    handler: (args, call) =>
      withSandbox("view_image", (sandbox) =>
        Effect.gen(function*() {
          const masked = sandbox.mask(args.image_path)
          const virtual = normalizeVirtual(masked)
          const allowed = [WORKSPACE, UPLOADS, OUTPUTS].some((root) => under(virtual, root) && virtual !== root)
          // DeerFlow's sentences (its tests look for them), each naming the virtual path too
          if (!masked.startsWith("/") || !allowed) {
            return `Error: Only image paths under ${WORKSPACE}, ${UPLOADS}, ${OUTPUTS} are allowed: ` +
              displayPath(masked)
          }
          // DeerFlow's order: whether the file is there and is a file, then its format
          const info = yield* Effect.catchIf(
            Effect.map(sandbox.stat(args.image_path), (stat) => stat as typeof stat | undefined),
            (e) => e.reason === "not_found",
            () => Effect.succeed(undefined)
          )
          if (info === undefined) return `Error: Image file not found: ${virtual}`
          if (info.kind !== "file") return `Error: Path is not a file: ${virtual}`
          const extension = extensionOf(virtual)
          const expected = IMAGE_TYPES[extension]
          if (expected === undefined) {
            return `Error: Unsupported image format: ${extension || "(none)"} (${virtual}). Supported formats: ` +
              Object.keys(IMAGE_TYPES).join(", ")
          }
          if (info.size > MAX_IMAGE_BYTES) {
            return `Error: Image file is too large: ${virtual} is ${info.size} bytes. ` +
              `Maximum supported size is ${MAX_IMAGE_BYTES} bytes`
          }
          const bytes = yield* sandbox.readBytes(args.image_path, MAX_IMAGE_BYTES)
          const actual = sniffImage(bytes)
          if (actual !== expected) {
            return actual === undefined
              ? `Error: File contents do not match a supported image format: ${virtual}`
              : `Error: Image contents are ${actual}, but file extension indicates ${expected}: ${virtual}`
          }
          const real = yield* sandbox.resolve(args.image_path, "read")
          return {
            message: M.tool(
              `Loaded image ${virtual} (${actual}, ${bytes.length} bytes); it is shown to you with your next turn.`,
              call.id,
              { name: call.name, status: "success" }
            ),
            update: { viewed_images: { [virtual]: { mime_type: actual, size: bytes.length, actual_path: real } } }
          }
        }))(call)
  })
