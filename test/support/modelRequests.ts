/** What the scripted model was sent (a Chat Completions request body), read the way the tests check it. */
import type { ChatRequestBody } from "../../src/layers/ScriptedChatServer.js"

/** The names of the tools offered to the model, in the request's order. */
export const toolNames = (body: ChatRequestBody): Array<string> =>
  (body.tools ?? []).map((t) => (t as { function: { name: string } }).function.name)

/** A sent message's content as text: the string, or its parts as JSON. */
export const messageText = (message: { readonly [key: string]: unknown }): string =>
  typeof message.content === "string" ? message.content : JSON.stringify(message.content ?? "")
