/**
 * What the tests of a gateway run stopped when it no longer owns its thread (its lease taken, or its life run out)
 * look at: whether its command still runs, and whether every tool call of a history has its result.
 */
import * as Fs from "node:fs"

/** Whether a process of this host runs `command` (its command line holds it). */
export const running = (command: string): boolean =>
  Fs.readdirSync("/proc").filter((name) => /^\d+$/.test(name)).some((pid) => {
    try {
      return Fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").join(" ").includes(command)
    } catch {
      return false
    }
  })

/** Whether every tool call of `messages` (LangChain's serialised shape) has its result. */
export const paired = (messages: ReadonlyArray<any>): boolean => {
  const answered = new Set(messages.filter((m) => m.type === "tool").map((m) => m.tool_call_id))
  return messages.flatMap((m) => (m.type === "ai" ? m.tool_calls ?? [] : [])).every((c: any) => answered.has(c.id))
}
