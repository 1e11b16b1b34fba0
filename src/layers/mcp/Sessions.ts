/**
 * The sessions of scoped MCP calls (a run's user and thread each: `Mcp.SessionScope`), least recently used first.
 * The first scope of a server takes its shared connection (the one its tools were listed on, which no scope had
 * used), unless the caller makes it a connection of its own (a stdio server pinned to the scope's workspace); every
 * other scope has a connection of its own. A session closed for room is handed back to be stopped; the shared
 * connection is then started afresh by its next use, so no scope inherits another's server state.
 *
 * Room is bounded twice: a user past `maxPerUser` sessions closes their own least recently used first, and past
 * `maxSessions` the least recently used idle session of the user holding the most is closed (the users of many
 * accounts, which anyone may register, push out their own sessions first). A session with a call under way
 * (`enter`ed and not yet `leave`d) is never closed for room.
 */
import type { SessionScope } from "../../services/Mcp.js"

/** A session table over connections of type `C`. */
export interface Table<C extends { readonly name: string }> {
  /**
   * The session of `scope` on server `shared`, entered: found, or made by `open` (given whether the server's
   * shared connection is free to take; returning `shared` itself takes it). `closed`: sessions closed for room,
   * for the caller to stop.
   */
  readonly take: (
    shared: C,
    scope: SessionScope,
    open: (sharedIsFree: boolean) => C
  ) => { readonly session: C; readonly closed: ReadonlyArray<C> }
  /** Counts a call under way on `c`. */
  readonly enter: (c: C) => C
  /** Ends a call `enter` counted. */
  readonly leave: (c: C) => void
  /** Forgets every session, handing them back (the service is closing). */
  readonly clear: () => ReadonlyArray<C>
}

/** A table holding at most `maxSessions` sessions, `maxPerUser` of them a user's. */
export const make = <C extends { readonly name: string }>(maxSessions: number, maxPerUser: number): Table<C> => {
  const sessions = new Map<string, C>()
  // (the user of each session)
  const owners = new Map<string, string>()
  // (which session holds each server's shared connection)
  const takenBy = new Map<string, string>()
  // (the calls under way on each connection: a session with one is not closed for room)
  const busy = new Map<C, number>()
  const enter = (c: C) => {
    busy.set(c, (busy.get(c) ?? 0) + 1)
    return c
  }
  const leave = (c: C) => {
    const left = (busy.get(c) ?? 1) - 1
    if (left > 0) busy.set(c, left)
    else busy.delete(c)
  }
  const take: Table<C>["take"] = (shared, scope, open) => {
    const key = `${shared.name}\u0000${scope.userId}\u0000${scope.threadId}`
    const found = sessions.get(key)
    if (found !== undefined) {
      sessions.delete(key)
      sessions.set(key, found)
      return { session: enter(found), closed: [] }
    }
    const session = open(!takenBy.has(shared.name))
    if (session === shared) takenBy.set(shared.name, key)
    sessions.set(key, enter(session))
    owners.set(key, scope.userId)
    const closed: Array<C> = []
    const close = (old: string, s: C) => {
      sessions.delete(old)
      owners.delete(old)
      if (takenBy.get(s.name) === old) takenBy.delete(s.name)
      closed.push(s)
    }
    let mine = 0
    for (const owner of owners.values()) if (owner === scope.userId) mine++
    for (const [old, s] of sessions) {
      if (mine <= maxPerUser) break
      if (owners.get(old) !== scope.userId || (busy.get(s) ?? 0) > 0) continue
      close(old, s)
      mine--
    }
    while (sessions.size > maxSessions) {
      const held = new Map<string, number>()
      for (const owner of owners.values()) held.set(owner, (held.get(owner) ?? 0) + 1)
      let victim: readonly [string, C] | undefined
      let most = 0
      for (const [old, s] of sessions) {
        const count = held.get(owners.get(old) ?? "") ?? 0
        if ((busy.get(s) ?? 0) === 0 && count > most) {
          most = count
          victim = [old, s]
        }
      }
      if (victim === undefined) break
      close(victim[0], victim[1])
    }
    return { session, closed }
  }
  const clear = () => {
    const all = [...sessions.values()]
    sessions.clear()
    owners.clear()
    takenBy.clear()
    return all
  }
  return { take, enter, leave, clear }
}
