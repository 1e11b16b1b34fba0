/**
 * The MCP session table's laws, over any sequence of scoped calls: a thread's calls find their own session; no
 * session with a call under way is closed for room; room is bounded per user and in all as a session is made (while
 * idle sessions remain);
 * the server's shared connection is held by at most one session, and is free again when its holder is closed.
 */
import { assert, describe, it } from "@effect/vitest"
import * as FC from "effect/FastCheck"
import * as Sessions from "../../../src/layers/mcp/Sessions.js"

interface Conn {
  readonly name: string
  readonly id: number
}

const op = FC.record({
  user: FC.constantFrom("alice", "bob", "carol"),
  thread: FC.constantFrom("t1", "t2", "t3", "t4", "t5"),
  // whether this call stays under way until the end of the sequence
  hold: FC.boolean()
})

describe("MCP sessions", () => {
  it.prop("calls find their session; busy ones stay; room is bounded; the shared connection has one holder", [
    FC.array(op, { maxLength: 60 }),
    FC.integer({ min: 1, max: 6 }),
    FC.integer({ min: 1, max: 4 })
  ], ([ops, maxSessions, maxPerUser]) => {
    const table = Sessions.make<Conn>(maxSessions, maxPerUser)
    const shared: Conn = { name: "srv", id: 0 }
    let next = 1
    // (what each thread's session is, while the table keeps it; the calls held open)
    const live = new Map<string, Conn>()
    const held: Array<Conn> = []
    let sharedHolder: string | undefined
    for (const { hold, thread, user } of ops) {
      const key = `${user}/${thread}`
      const known = live.get(key)
      let freeSeen: boolean | undefined
      const { closed, session } = table.take(shared, { userId: user, threadId: thread }, (free) => {
        freeSeen = free
        return free ? shared : { name: "srv", id: next++ }
      })
      if (known !== undefined) {
        assert.strictEqual(session, known, "a thread's next call finds its own session")
        assert.isUndefined(freeSeen, "a found session is not made again")
      } else {
        assert.strictEqual(freeSeen, sharedHolder === undefined, "the shared connection is offered only when free")
        if (session === shared) sharedHolder = key
      }
      live.set(key, session)
      for (const c of closed) {
        assert.notInclude(held, c, "a session with a call under way is never closed for room")
        assert.notStrictEqual(c, session, "the session just taken is not closed")
        for (const [k, v] of live) if (v === c) live.delete(k)
        if (c === shared) sharedHolder = undefined
      }
      // (bounded as a session is made: the one made is under way then, as are those held)
      const idle = [...live.values()].filter((c) => !held.includes(c) && c !== session)
      if (known === undefined && idle.length > 0) assert.isAtMost(live.size, maxSessions, "past the pool's size only busy sessions stay")
      const mine = [...live.keys()].filter((k) => k.startsWith(`${user}/`))
      const mineIdle = mine.filter((k) => !held.includes(live.get(k)!) && k !== key)
      if (known === undefined && mineIdle.length > 0) assert.isAtMost(mine.length, maxPerUser, "a user keeps at most their share")
      if (hold) held.push(session)
      else table.leave(session)
    }
    const cleared = table.clear()
    assert.sameMembers([...cleared], [...live.values()], "closing hands back every session kept")
  })
})
