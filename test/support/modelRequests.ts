/** What the scripted model was sent (a Chat Completions request body), read the way the tests check it. */
import type { ChatRequestBody } from "../../src/layers/ScriptedChatServer.js"

/** The names of the tools offered to the model, in the request's order. */
export const toolNames = (body: ChatRequestBody): Array<string> =>
  (body.tools ?? []).map((t) => (t as { function: { name: string } }).function.name)
