/**
 * Tool calls as the terminal shows them: one compact line per call, labelled with the model's description of
 * it and naming the tool with its key argument (a command, a path, a pattern...).
 */
import type { ToolCall } from "../../../state/Message.js"
import { oneLine, preview } from "./Text.js"

/** One line for a tool call: `name(args)`, the arguments as compact JSON clipped to `chars`. */
export const toolCallLine = (call: Pick<ToolCall, "name" | "args">, chars = 120): string =>
  `${call.name}(${preview(call.args, chars)})`

/** The arguments that say most about a call, in order of preference (the first one present is shown). */
export const KEY_ARGUMENTS = ["command", "pattern", "path", "query", "url", "filepaths", "image_path"] as const

/**
 * A call's key argument as one short line (a command's first line, a path, a pattern...); undefined when it
 * has none of `KEY_ARGUMENTS`.
 */
export const keyArgument = (args: Readonly<Record<string, unknown>>, chars = 100): string | undefined => {
  for (const name of KEY_ARGUMENTS) {
    const value = args[name]
    if (typeof value === "string" && value.trim() !== "") {
      // A search says where: `TODO in /mnt/user-data/workspace`.
      const where = name === "pattern" && typeof args.path === "string" && args.path !== "" ? ` in ${args.path}` : ""
      return oneLine(`${value}${where}`, chars)
    }
    if (Array.isArray(value) && value.length > 0 && value.every((v) => typeof v === "string")) {
      return oneLine(value.join(" "), chars)
    }
  }
  return undefined
}

/**
 * A tool call in one compact line: the model's `description` of it as the label, then the tool and its key
 * argument (`Save the greeting · write_file /mnt/user-data/workspace/hello.txt`); a call without a key
 * argument shows its other arguments as clipped JSON. Not made safe: callers pass it through `safeText`.
 */
export const toolLine = (call: Pick<ToolCall, "name" | "args">): string => {
  const { detail, label } = toolLineParts(call)
  return label === undefined ? detail : `${label} · ${detail}`
}

/** The two parts of `toolLine`: the description (if any) and the tool with its key argument. */
export const toolLineParts = (
  call: Pick<ToolCall, "name" | "args">
): { readonly label: string | undefined; readonly detail: string } => {
  const { description, ...rest } = call.args as Record<string, unknown>
  const label = typeof description === "string" && description.trim() !== "" ? oneLine(description, 80) : undefined
  const key = keyArgument(rest)
  const detail = key !== undefined
    ? `${call.name} ${key}`
    : Object.keys(rest).length > 0
    ? `${call.name} ${preview(rest, 80)}`
    : call.name
  return { label, detail }
}
