/**
 * The probe of the attacks on a bash command's long output cut in its middle (Attack27BashCut, Attack28BashCut): an
 * uploaded file holding a secret just before the end of what the output's head keeps, and a model that `cat`s it
 * and records the tool result it reads.
 */
import type { ChatRequestBody, Turn } from "../../src/layers/ScriptedChatServer.js"
import { middleMarker } from "../../src/layers/sandbox/bash/Output.js"

/** The file: `secret` 12 characters before the end of what the head of a `max`-character output keeps. */
export const secretAtHeadEnd = (secret: string, max: number, total: number) => {
  const head = Math.floor((max - middleMarker(total).length) / 2)
  const before = "a".repeat(head - 12)
  return before + secret + "b".repeat(total - before.length - secret.length)
}

/** A model that runs `cat` on the uploaded `config.txt`, then answers; what it read is pushed to `seen`. */
export const catUpload = (seen: Array<string>) => (body: ChatRequestBody): Turn => {
  const last = body.messages.at(-1)
  if (last?.role === "tool") {
    seen.push(JSON.stringify(last.content))
    return "Read it."
  }
  const command = "cat /mnt/user-data/uploads/config.txt"
  return { toolCalls: [{ name: "bash", arguments: { description: "read the upload", command } }] }
}
