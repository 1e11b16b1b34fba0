/**
 * The count of a ZIP archive's entries taken before jszip opens it: the entries jszip itself finds, whatever the
 * archive's end record declares and wherever bytes were put before it, and no further than the bound asked for.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as FC from "effect/FastCheck"
import JSZip from "jszip"
import * as ZipDirectory from "../../src/state/ZipDirectory.js"

const archive = async (sizes: ReadonlyArray<number>) => {
  const zip = new JSZip()
  sizes.forEach((size, i) => zip.file(`${i}.txt`, "x".repeat(size)))
  return zip.generateAsync({ type: "uint8array", compression: "DEFLATE" })
}

/** What jszip finds in `bytes`: its files. */
const jszipCount = async (bytes: Uint8Array) => Object.keys((await JSZip.loadAsync(bytes)).files).length

const sizes = FC.array(FC.nat(300), { maxLength: 40 })

/** An effectful property over `arbitraries`: the async check, run as an effect. */
const prop = <A extends ReadonlyArray<unknown>>(
  name: string,
  arbitraries: { readonly [K in keyof A]: FC.Arbitrary<A[K]> },
  check: (values: A) => Promise<void>
) => it.effect.prop(name, arbitraries as never, (values: never) => Effect.promise(() => check(values)))

describe("ZipDirectory", () => {
  prop("counts the entries jszip finds, and what they declare they unpack to", [sizes], async ([each]) => {
    const bytes = await archive(each)
    const directory = ZipDirectory.read(bytes, 1000)!
    assert.strictEqual(directory.entries, await jszipCount(bytes))
    assert.strictEqual(directory.declared, each.reduce((a, b) => a + b, 0))
  })

  prop("counts no further than the bound asked for, plus one", [sizes, FC.nat(45)], async ([each, max]) => {
    const directory = ZipDirectory.read(await archive(each), max)!
    assert.strictEqual(directory.entries, Math.min(each.length, max + 1))
  })

  prop("counts every record, whatever the end record declares", [sizes, FC.nat(3)], async ([each, lie]) => {
    const bytes = await archive(each)
    // the end record's two counts (of this disk, and in all) say `lie`
    const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
    view.setUint16(bytes.length - 22 + 8, lie, true)
    view.setUint16(bytes.length - 22 + 10, lie, true)
    const directory = ZipDirectory.read(bytes, 1000)
    if (directory === undefined) {
      // none found where some were declared: jszip refuses it too
      assert.strictEqual(each.length, 0)
      return
    }
    assert.strictEqual(directory.entries, each.length)
    assert.strictEqual(directory.entries, await jszipCount(bytes))
  })

  prop(
    "finds the records of an archive with bytes put before it",
    [sizes, FC.uint8Array({ minLength: 1, maxLength: 64 })],
    async ([each, prefix]) => {
      const bytes = new Uint8Array([...prefix, ...(await archive(each))])
      assert.strictEqual(ZipDirectory.read(bytes, 1000)!.entries, await jszipCount(bytes))
    }
  )

  it("is no archive without an end record, and unbounded for Zip64", () => {
    assert.isUndefined(ZipDirectory.read(new TextEncoder().encode("not a zip archive at all"), 10))
    const zip64 = new Uint8Array(22)
    const view = new DataView(zip64.buffer)
    view.setUint32(0, 0x06054b50, true)
    view.setUint16(10, 0xffff, true)
    assert.deepStrictEqual(ZipDirectory.read(zip64, 10), { entries: Infinity, declared: Infinity })
  })
})
