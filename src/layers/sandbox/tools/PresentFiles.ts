/** The `present_files` tool: shows finished files in the outputs directory to the user as results. */
import * as Effect from "effect/Effect"
import { OUTPUTS } from "../../../services/Sandbox.js"
import * as Tool from "../../../services/Tool.js"
import * as M from "../../../state/Message.js"
import { displayPath } from "../VirtualPaths.js"
import { PresentFilesArgs } from "./Args.js"
import * as Texts from "./Texts.js"
import { normalizeVirtual, under } from "./Text.js"
import type { ToolContext } from "./ToolContext.js"
import { statFile } from "./ToolContext.js"

/** The `present_files` tool. */
export const presentFiles = ({ withSandbox }: ToolContext) =>
  Tool.make({
    name: "present_files",
    readOnly: true,
    description: Texts.PRESENT_FILES_DESCRIPTION,
    parameters: PresentFilesArgs,
    handler: (args, call) =>
      withSandbox("present_files", (sandbox) =>
        Effect.gen(function*() {
          if (args.filepaths.length === 0) return "Error: filepaths is empty; give at least one file under " + OUTPUTS
          const artifacts: Array<string> = []
          for (const given of args.filepaths) {
            // A host path inside the thread's outputs is accepted and normalised to its virtual path.
            const masked = sandbox.mask(given)
            const refused = `Error: Only files in ${OUTPUTS} can be presented: ${displayPath(masked)}`
            if (given.includes("\0") || !masked.startsWith("/")) return refused
            const virtual = normalizeVirtual(masked)
            if (!under(virtual, OUTPUTS) || virtual === OUTPUTS) return refused
            const real = yield* Effect.either(sandbox.resolve(virtual, "read"))
            if (real._tag === "Left") {
              return real.left.reason === "not_found" ? `Error: File not found: ${virtual}` : refused
            }
            // The real location must be in outputs too (no symlink out of it).
            if (!under(sandbox.mask(real.right), OUTPUTS)) return refused
            const info = yield* statFile(sandbox, virtual)
            if (info.kind !== "file") return `Error: Not a file: ${virtual}. Present files one by one.`
            if (!artifacts.includes(virtual)) artifacts.push(virtual)
          }
          return {
            message: M.tool(
              `Presented ${artifacts.length} file(s) to the user: ${artifacts.join(", ")}`,
              call.id,
              { name: call.name, status: "success" }
            ),
            update: { artifacts }
          }
        }))(call)
  })
