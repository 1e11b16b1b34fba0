/**
 * A browser of one account of a test gateway (`gateway.auth.accounts`): the cookies its answers set, sent back as a
 * browser sends them, and the session's CSRF token sent with every state-changing request (unless `csrf: false`).
 */
export interface Browser {
  readonly cookies: Map<string, string>
  readonly fetch: (path: string, init?: RequestInit & { readonly csrf?: boolean }) => Promise<Response>
}

/** A browser over the gateway `gateway()` (read at each request). */
export const browser = (gateway: () => { readonly url: string }): Browser => {
  const cookies = new Map<string, string>()
  const take = (response: Response) => {
    for (const line of response.headers.getSetCookie()) {
      const [pair] = line.split(";")
      const at = pair!.indexOf("=")
      const name = pair!.slice(0, at)
      const value = pair!.slice(at + 1)
      if (/max-age=0|expires=thu, 01 jan 1970/i.test(line) || value === "") cookies.delete(name)
      else cookies.set(name, value)
    }
  }
  return {
    cookies,
    fetch: async (path, init = {}) => {
      const { csrf = true, ...rest } = init
      const headers: Record<string, string> = { ...(rest.headers as Record<string, string> | undefined) }
      if (typeof rest.body === "string" && headers["content-type"] === undefined) {
        headers["content-type"] = "application/json"
      }
      if (cookies.size > 0) headers["cookie"] = [...cookies].map(([n, v]) => `${n}=${v}`).join("; ")
      const method = (rest.method ?? "GET").toUpperCase()
      if (csrf && method !== "GET" && cookies.has("csrf_token")) headers["x-csrf-token"] = cookies.get("csrf_token")!
      const response = await fetch(`${gateway().url}${path}`, { ...rest, headers })
      take(response)
      return response
    }
  }
}

/** The sign-in form of DeerFlow's app (`POST /api/v1/auth/login/local`). */
export const loginForm = (email: string, password: string) =>
  new URLSearchParams({ password, remember_me: "true", username: email }).toString()

