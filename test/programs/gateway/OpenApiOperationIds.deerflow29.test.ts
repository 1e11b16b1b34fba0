/**
 * DeerFlow's `test_openapi_operation_ids.py`, against a real gateway's `/openapi.json`: every operation has an
 * `operationId` of its own (code generators need them unique), and a run's stream is two operations, `GET` (the
 * SDK's `joinStream`) and `POST` (`useStream`'s stop button), each with its own id. DeerFlow's first case (FastAPI's
 * "Duplicate Operation ID" warning while the document is made) has no counterpart: the document is HttpApi's.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Support from "./support.js"

let gateway: Support.TestGateway
let spec: any
beforeAll(async () => {
  gateway = await Support.start({ script: () => "Hello." })
  spec = await (await fetch(`${gateway.url}/openapi.json`)).json()
})
afterAll(() => gateway.stop())

const METHODS = ["get", "put", "post", "delete", "options", "head", "patch", "trace"]

describe("test_openapi_operation_ids.py", () => {
  it("test_openapi_operation_ids_are_unique", () => {
    const seen = new Map<string, Array<string>>()
    let count = 0
    for (const [path, item] of Object.entries<any>(spec.paths)) {
      for (const method of METHODS) {
        const operation = item[method]
        if (operation === undefined) continue
        count++
        assert.isString(operation.operationId, `${method} ${path} has an operationId`)
        seen.set(operation.operationId, [...(seen.get(operation.operationId) ?? []), `${method} ${path}`])
      }
    }
    assert.isAbove(count, 100)
    const duplicates = [...seen].filter(([, where]) => where.length > 1)
    assert.deepStrictEqual(duplicates, [])
  })

  it("test_stream_existing_run_exposes_distinct_get_and_post", () => {
    // (LangGraph's paths are described once, the prefixes they are served under, /api among them, as its servers)
    const item = spec.paths["/threads/{thread_id}/runs/{run_id}/stream"]
    assert.isDefined(item, "/threads/{thread_id}/runs/{run_id}/stream is described")
    assert.isString(item.get?.operationId)
    assert.isString(item.post?.operationId)
    assert.notStrictEqual(item.get.operationId, item.post.operationId)
    const servers = (item.servers ?? spec.servers ?? []).map((server: any) => server.url)
    assert.include(servers, "/api")
  })
})
