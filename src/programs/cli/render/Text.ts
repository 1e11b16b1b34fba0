/**
 * Text from outside (a model, a server, a tool) shortened and made safe for a terminal: clipped to a few lines,
 * values previewed as bounded JSON, control characters made visible and secrets replaced (`safeText`).
 */
import * as Redact from "../../../state/Redact.js"

/** Clips text to its first `lines` lines and `chars` characters, saying how much was left out. */
export const clip = (text: string, options: { readonly lines?: number; readonly chars?: number } = {}): string => {
  const maxLines = options.lines ?? 4
  const maxChars = options.chars ?? 200
  const trimmed = text.replace(/\s+$/, "")
  const lines = trimmed.split("\n")
  let out = lines.slice(0, maxLines).join("\n")
  if (out.length > maxChars) out = out.slice(0, maxChars)
  const omitted = trimmed.length - out.length
  return omitted > 0 ? `${out}… (+${omitted} chars)` : out
}

/**
 * Compact JSON of a value, cut at `chars` characters and at `depth` levels of nesting (deeper objects show as
 * `{…}` / `[…]`): bounded work whatever the value, where `JSON.stringify` would walk all of it (and overflow
 * the stack on a deeply nested one).
 */
export const preview = (value: unknown, chars = 120, depth = 8): string => {
  let out = ""
  const full = () => out.length >= chars
  const walk = (node: unknown, level: number): void => {
    if (full()) return
    if (node === null || typeof node !== "object") {
      out += node === undefined ? "null" : JSON.stringify(node) ?? "null"
      return
    }
    const array = Array.isArray(node)
    if (level >= depth) {
      out += array ? "[…]" : "{…}"
      return
    }
    out += array ? "[" : "{"
    let first = true
    for (const key of Object.keys(node)) {
      if (full()) return
      if (!first) out += ","
      first = false
      if (!array) out += `${JSON.stringify(key)}:`
      walk((node as Record<string, unknown>)[key], level + 1)
    }
    out += array ? "]" : "}"
  }
  walk(value, 0)
  return out.length > chars ? `${out.slice(0, chars - 1)}…` : out
}

/** The first line of `text` with its runs of whitespace collapsed, cut at `chars` (`…` when more follows). */
export const oneLine = (text: string, chars: number): string => {
  const lines = text.trim().split("\n")
  const first = lines[0]!.replace(/\s+/g, " ")
  const more = lines.length > 1 ? " …" : ""
  return first.length > chars ? `${first.slice(0, chars - 1)}…` : `${first}${more}`
}

/** Each line of `text` prefixed with `prefix`. */
export const indent = (text: string, prefix: string) => text.split("\n").map((line) => prefix + line).join("\n")

/** Text from outside made safe to print: secrets replaced, control characters made visible. */
export const safeText = (text: string, redactor: Redact.Redactor = Redact.none): string =>
  Redact.controls(redactor.text(text))
