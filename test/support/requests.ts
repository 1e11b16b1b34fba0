/**
 * Requests to a test gateway as one of its users (a bearer token), as the gateway's tests make them. The server
 * is read at each request: tests start theirs in `beforeAll`, after these helpers are made.
 */
import { assert } from "@effect/vitest"

/** The server the requests go to (its `url`, no trailing slash). */
export type Target = () => { readonly url: string }

/** An answer read whole: status, headers, text, and the text read as JSON. */
export interface Answer {
  readonly status: number
  readonly headers: Headers
  readonly text: string
  readonly json: () => any
}

/**
 * `(method, path, body?)` as the user of `token` (none: the open gateway's user): a body is sent as JSON (a
 * `FormData` body as a form), and the answer is read whole.
 */
export const as = (target: Target, token?: string) =>
async (method: string, path: string, body?: unknown): Promise<Answer> => {
  const form = body instanceof FormData
  const response = await fetch(`${target().url}${path}`, {
    method,
    headers: {
      ...(token !== undefined ? { authorization: `Bearer ${token}` } : {}),
      ...(body !== undefined && !form ? { "content-type": "application/json" } : {})
    },
    ...(body === undefined ? {} : { body: form ? body : JSON.stringify(body) })
  })
  const text = await response.text()
  return { status: response.status, headers: response.headers, text, json: () => JSON.parse(text) }
}

/**
 * `(token, path, { method, body })` under `/api` (DeerFlow's settings routes), JSON in (the content type always
 * set), the `Response` as it came.
 */
export const api = (target: Target) =>
(token: string, path: string, init: { method?: string; body?: unknown } = {}): Promise<Response> =>
  fetch(`${target().url}/api${path}`, {
    method: init.method ?? "GET",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    ...(init.body === undefined ? {} : { body: JSON.stringify(init.body) })
  })

/**
 * `(token, method, path, body?, headers?)` as a hostile client sends it: the body as given (a string, JSON's
 * content type set), any extra headers, the `Response` as it came.
 */
export const raw = (target: Target) =>
(
  token: string,
  method: string,
  path: string,
  body?: string,
  headers: Record<string, string> = {}
): Promise<Response> =>
  fetch(`${target().url}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${token}`,
      ...(body !== undefined ? { "content-type": "application/json" } : {}),
      ...headers
    },
    ...(body !== undefined ? { body } : {})
  })

/** The JSON body of a response, asserted to be a 200 (the body in the message when not). */
export const ok = async (response: Response): Promise<any> => {
  const body = await response.json()
  assert.strictEqual(response.status, 200, JSON.stringify(body))
  return body
}
