/**
 * The base ToolService over a list of tools: definitions in list order, arguments decoded with each tool's
 * Schema, and an unknown tool answered with a result the model can read.
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Tool from "../services/Tool.js"
import { ToolService } from "../services/ToolService.js"

/** A ToolService over these tools. */
export const make = (tools: ReadonlyArray<Tool.Tool>): ToolService["Type"] => {
  const byName = new Map(tools.map((tool) => [tool.name, tool]))
  const definitions = tools.map(Tool.definition)
  return ToolService.of({
    definitions,
    call: (call) => {
      const tool = byName.get(call.name)
      if (tool === undefined) {
        return Effect.succeed(Tool.errorResult(
          call,
          `Error: Tool '${call.name}' does not exist. ` +
            `Available tools: ${definitions.map((d) => d.name).join(", ") || "(none)"}.`
        ))
      }
      return Tool.invoke(tool, call)
    }
  })
}

/** A layer providing a ToolService over these tools. */
export const layer = (tools: ReadonlyArray<Tool.Tool>): Layer.Layer<ToolService> =>
  Layer.sync(ToolService, () => make(tools))
