/**
 * The SCRIPTED model behind `antler serve` while DeerFlow's app is driven: it replays fixed answers chosen by the
 * words of the user's last message (it does not think). Each flow's prompts carry a keyword that picks its answer:
 * a plain answer that repeats the question (so a screenshot shows which turn it is), a file written and presented
 * (the artifact flow), an answer that stalls until the run is cancelled (the stop flow). Antler's internal calls
 * (the memory update, a summary) get answers of their shape.
 */
import type { ChatRequestBody, Turn } from "../../src/layers/ScriptedChatServer.js"

/** The file the artifact flow's model writes and presents. */
export const ARTIFACT = "/mnt/user-data/outputs/deer-notes.md"

/** The text of that file. */
export const ARTIFACT_TEXT = "# Deer notes\n\n- Deer shed their antlers every winter.\n- A young deer is a fawn.\n"

type WireMessage = ChatRequestBody["messages"][number]

const textOf = (message: WireMessage | undefined): string => {
  const content = message?.content
  if (typeof content === "string") return content
  if (!Array.isArray(content)) return ""
  return content.map((part) => (typeof part?.text === "string" ? part.text : "")).join("\n")
}

/** The user's own words in the last user message (without the uploads block Antler prepends). */
const lastUserText = (body: ChatRequestBody): string => {
  const user = [...body.messages].reverse().find((m) => m.role === "user")
  return textOf(user)
    .replace(/<current_uploads>[\s\S]*?<\/current_uploads>/g, "")
    .replace(/--- (BEGIN|END) USER INPUT ---/g, "")
    .trim()
}

const lastIsTool = (body: ChatRequestBody) => body.messages[body.messages.length - 1]?.role === "tool"

const toolsCalled = (body: ChatRequestBody): ReadonlyArray<string> => {
  const names: Array<string> = []
  const start = body.messages.map((m) => m.role).lastIndexOf("user")
  for (const m of body.messages.slice(start + 1)) {
    const calls = Array.isArray(m.tool_calls) ? m.tool_calls as ReadonlyArray<{ function?: { name?: unknown } }> : []
    for (const call of calls) names.push(String(call.function?.name ?? ""))
  }
  return names
}

const clip = (text: string, size: number) => (text.length > size ? `${text.slice(0, size - 3)}...` : text)

/** The labels of a summary that is the user's, as the update prompt asks (DeerMem's write gate reads them). */
const USER_SUMMARY = { scope: "user", authority: "descriptive" }

/** The memory update's answer: one fact about the user, so the memory screen has something to show. */
const memoryUpdate = JSON.stringify({
  user: {
    workContext: { summary: "Tries DeerFlow's web app against Antler.", shouldUpdate: true, ...USER_SUMMARY },
    personalContext: { summary: "", shouldUpdate: false, ...USER_SUMMARY },
    topOfMind: { summary: "Deer and their antlers.", shouldUpdate: true, ...USER_SUMMARY }
  },
  history: {
    recentMonths: { summary: "", shouldUpdate: false, ...USER_SUMMARY },
    earlierContext: { summary: "", shouldUpdate: false, ...USER_SUMMARY },
    longTermBackground: { summary: "", shouldUpdate: false, ...USER_SUMMARY }
  },
  newFacts: [{
    content: "The user is curious about deer.",
    category: "preference",
    confidence: 0.95,
    scope: "user",
    durability: "durable",
    authority: "descriptive"
  }],
  factsToRemove: []
})

/**
 * The script. A plain question is answered with its words and how many times it was asked (`take 2` after a
 * regenerate); `takes` counts them for one run of the script.
 */
export const makeScript = () => {
  const takes = new Map<string, number>()
  return (body: ChatRequestBody): Turn => answer(body, takes)
}

const answer = (body: ChatRequestBody, takes: Map<string, number>): Turn => {
  const first = textOf(body.messages[0])
  const tools = body.tools ?? []
  if (tools.length === 0 && first.includes("long-term memory an AI assistant keeps")) return memoryUpdate
  if (tools.length === 0 && /summar/i.test(first)) return "## Summary\nThe user asked about deer; answers were given."
  if (tools.length === 0) return "Deer questions"
  const text = lastUserText(body)
  if (/\bslowly\b/i.test(text)) {
    // the stop flow: the answer starts, then nothing more comes until the run is cancelled
    return { content: "Let me think about this for a long while", stall: true }
  }
  if (/\bnotes\b/i.test(text)) {
    const called = toolsCalled(body)
    if (!called.includes("write_file")) {
      return {
        content: "I'll write the notes to a file. ",
        toolCalls: [{ name: "write_file", arguments: { description: "Save the notes", path: ARTIFACT, content: ARTIFACT_TEXT } }]
      }
    }
    if (!called.includes("present_files")) {
      return { toolCalls: [{ name: "present_files", arguments: { filepaths: [ARTIFACT] } }] }
    }
    return "The notes are in deer-notes.md."
  }
  if (/custom agent name is/i.test(text)) return "Happy to help. What should your agent be good at?"
  if (/save this custom agent now/i.test(text)) {
    if (!toolsCalled(body).includes("setup_agent")) {
      return {
        content: "Saving your agent. ",
        toolCalls: [{
          name: "setup_agent",
          arguments: { soul: "# Deer guide\n\nYou answer questions about deer, briefly.", description: "Answers questions about deer" }
        }]
      }
    }
    return "Your agent is saved."
  }
  if (lastIsTool(body)) return "Done."
  const take = (takes.get(text) ?? 0) + 1
  takes.set(text, take)
  return `Scripted answer to: ${clip(text, 80)} (take ${take})`
}
