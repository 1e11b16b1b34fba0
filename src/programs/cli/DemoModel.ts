/**
 * The SCRIPTED model `antler demo --model-server` serves, for trying `antler run` and `antler serve` offline: it
 * does not think, it replays fixed answers chosen by the words of the user's last message. A plain question is
 * answered with its own words; a message that mentions a file gets a file written to the thread's outputs and
 * presented (so the tools, the sandbox and the artifacts can be seen); the harness's internal calls (a title, a
 * summary, the memory update) get answers of their shape.
 */
import type * as ScriptedChatServer from "../../layers/ScriptedChatServer.js"

type Body = ScriptedChatServer.ChatRequestBody
type WireMessage = Body["messages"][number]

/** The file a request that mentions a file gets. */
export const NOTES = "/mnt/user-data/outputs/notes.md"

const textOf = (message: WireMessage | undefined): string => {
  const content = message?.content
  if (typeof content === "string") return content
  if (!Array.isArray(content)) return ""
  return content.map((part) => (typeof part?.text === "string" ? part.text : "")).join("\n")
}

/** The user's own words in the last user message (without the markers and blocks the harness adds). */
const lastUserText = (body: Body): string => {
  const user = [...body.messages].reverse().find((m) => m.role === "user")
  return textOf(user)
    .replace(/<current_uploads>[\s\S]*?<\/current_uploads>/g, "")
    .replace(/--- (BEGIN|END) USER INPUT ---/g, "")
    .trim()
}

/** The tools called since the last user message. */
const called = (body: Body): ReadonlyArray<string> => {
  const start = body.messages.map((m) => m.role).lastIndexOf("user")
  return body.messages.slice(start + 1).flatMap((m) =>
    Array.isArray(m.tool_calls)
      ? (m.tool_calls as ReadonlyArray<{ function?: { name?: unknown } }>).map((c) => String(c.function?.name ?? ""))
      : []
  )
}

const clip = (text: string, size: number) => (text.length > size ? `${text.slice(0, size - 3)}...` : text)

/** A summary the memory update leaves as it is, labelled as the update prompt asks (the write gate reads them). */
const UNCHANGED = { summary: "", shouldUpdate: false, scope: "user", authority: "descriptive" }

/** The memory update's answer: nothing learnt (a scripted model knows nothing of the user). */
const NOTHING_LEARNT = JSON.stringify({
  user: { workContext: UNCHANGED, personalContext: UNCHANGED, topOfMind: UNCHANGED },
  history: { recentMonths: UNCHANGED, earlierContext: UNCHANGED, longTermBackground: UNCHANGED },
  newFacts: [],
  factsToRemove: []
})

/** The script (a function of each request). */
export const script: ScriptedChatServer.Script = (body) => {
  const first = textOf(body.messages[0])
  if ((body.tools ?? []).length === 0) {
    if (first.includes("long-term memory")) return NOTHING_LEARNT
    if (/summar/i.test(first)) return "## Summary\nThe user asked questions; a scripted model answered them."
    return "Scripted chat"
  }
  const text = lastUserText(body)
  if (/\bfiles?\b/i.test(text)) {
    const done = called(body)
    if (!done.includes("write_file")) {
      return {
        content: "I'll write that to a file. ",
        toolCalls: [{
          name: "write_file",
          arguments: { description: "Save the notes", path: NOTES, content: `# Notes\n\n${clip(text, 200)}\n` }
        }]
      }
    }
    if (!done.includes("present_files")) {
      return { toolCalls: [{ name: "present_files", arguments: { filepaths: [NOTES] } }] }
    }
    return "The notes are in notes.md (a SCRIPTED answer: no real model was called)."
  }
  if (body.messages[body.messages.length - 1]?.role === "tool") return "Done."
  return `Scripted answer to: ${clip(text, 120)} (no real model was called)`
}
