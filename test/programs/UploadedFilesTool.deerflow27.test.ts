/**
 * DeerFlow's test_list_uploaded_files_tool, `TestToolSchema`: the model is offered `list_uploaded_files` with exactly
 * `include_outline` and `max_results` (no runtime internals), and reads the tool and its two arguments described in
 * DeerFlow's words (its `@tool` docstring as LangChain hands it on, and its `Annotated` argument texts).
 */
import { assert, describe, it } from "@effect/vitest"
import * as UploadedFilesTool from "../../src/programs/UploadedFilesTool.js"

describe("TestToolSchema", () => {
  // test_runtime_excluded_from_model_facing_args, test_openai_schema_generation_succeeds
  it("the model reads DeerFlow's description of the tool and of its two arguments", () => {
    const definition = UploadedFilesTool.tool("/nowhere").definition!
    const properties = definition.parameters.properties as Record<string, { description?: string }>
    assert.sameMembers(Object.keys(properties), ["include_outline", "max_results"])
    assert.strictEqual(
      definition.description,
      "Discover historical uploaded files available in this thread.\n\n" +
        "    Returns files that were uploaded in PREVIOUS turns — files uploaded in the\n" +
        "    current run are excluded (they are already listed in <current_uploads>).\n\n" +
        "    Use this tool when:\n" +
        "    - The user refers to previously uploaded files without naming them (e.g. \"analyze those PDFs I uploaded " +
        "before\")\n" +
        "    - You need to check what files are available in this thread\n" +
        "    - You are starting work on a thread and want an overview of available data\n\n" +
        "    Skip this tool when:\n" +
        "    - The user names a specific file — use read_file or grep directly with the path\n" +
        "    - The file was uploaded in the current run — it's already in <current_uploads>"
    )
    assert.strictEqual(
      properties.include_outline!.description,
      "Control which files get their document outline (headings/preview) returned. False (default): no outline for " +
        "any file — just filename, size, and path. True: include outline/preview for every .md-convertible file. " +
        "list of filenames: include outline/preview only for those specific files (e.g. [\"report.md\", \"data.csv\"])."
    )
    assert.strictEqual(properties.max_results!.description, "Maximum number of files to return (default 20, max 100).")
  })
})
