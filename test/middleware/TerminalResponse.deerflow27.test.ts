/**
 * DeerFlow's test_terminal_response_middleware.py, case by case where Antler differed: the words the model reads
 * with its one retry and the words the user reads after a second empty answer are DeerFlow's, exactly.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as TerminalResponse from "../../src/middleware/TerminalResponse.js"
import * as Tool from "../../src/services/Tool.js"
import * as M from "../../src/state/Message.js"
import * as H from "../support/harness.js"

const lookupStatus = Tool.make({
  name: "lookup_status",
  description: "Return a deterministic tool result.",
  parameters: Schema.Struct({}),
  handler: () => Effect.succeed("tool completed")
})

const run = (script: H.RunSpec<never>["script"]) =>
  H.run({ script, tools: [lookupStatus], middlewares: () => [TerminalResponse.layer()] })

const callStatus = { toolCalls: [{ name: "lookup_status", args: {} }] }

describe("TerminalResponse (DeerFlow test_terminal_response_middleware.py)", () => {
  // test_retries_empty_post_tool_response_once_and_returns_model_answer
  it.effect("the retry carries DeerFlow's recovery prompt, hidden, named terminal_response_recovery", () =>
    Effect.gen(function*() {
      const out = yield* run([callStatus, "", "The tool completed successfully."])
      const reminder = out.requests[2]!.messages.at(-1)!
      assert.strictEqual(reminder.type, "human")
      assert.strictEqual(reminder.name, "terminal_response_recovery")
      assert.isTrue(M.isHidden(reminder))
      assert.strictEqual(
        M.text(reminder),
        "<system_reminder>\nYour previous response after the tool execution was empty. Review the tool results " +
          "already present in the conversation and provide a concise, user-visible final response. Do not call " +
          "another tool unless it is strictly necessary.\n</system_reminder>"
      )
      assert.strictEqual(M.text(out.state.messages.at(-1)!), "The tool completed successfully.")
    }).pipe(H.withStore))

  // test_second_empty_post_tool_response_becomes_visible_error_fallback
  it.effect("a second empty answer becomes DeerFlow's fallback text, marked and with its error reason", () =>
    Effect.gen(function*() {
      const out = yield* run([callStatus, "", ""])
      const last = out.state.messages.at(-1)!
      assert.strictEqual(
        M.text(last),
        "The model completed the tool run but returned no final response, including after one automatic retry. " +
          "Please try again or use a different model."
      )
      assert.strictEqual(last.additional_kwargs?.deerflow_error_fallback, true)
      assert.strictEqual(out.end.error?.message, "Model returned an empty terminal response after one retry")
    }).pipe(H.withStore))
})
