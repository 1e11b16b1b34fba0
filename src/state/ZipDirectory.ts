/**
 * A ZIP archive's central directory, read as jszip reads it but without building anything: how many entries an
 * archive holds and what they declare they unpack to. It is the guard in front of jszip, whose `loadAsync` builds
 * an object for every entry it finds before anything can be checked (150,000 empty entries fit in 13 MiB and take
 * seconds of the event loop), and which reads records for as long as their signature holds, whatever count the
 * archive's end record declares. So this walks them the same way, and stops counting past a bound.
 */

const END_OF_DIRECTORY = 0x06054b50
const DIRECTORY_RECORD = 0x02014b50
const END_RECORD_BYTES = 22
const RECORD_BYTES = 46

/** What the central directory of an archive holds. */
export interface Directory {
  /** Its entries, counted no further than the bound asked for plus one (Infinity: a Zip64 archive). */
  readonly entries: number
  /** The unpacked bytes the entries counted declare (Infinity: one of them, or the archive, is Zip64). */
  readonly declared: number
}

/**
 * The central directory of `bytes` (undefined: not a ZIP archive jszip reads: no end record, a directory that
 * starts past the end record, or none of the records it declares), with its entries counted up to
 * `maxEntries + 1`. Where the directory's offset and its size disagree (bytes prepended to the archive, which
 * jszip allows for), the larger reading of the two counts.
 */
export const read = (bytes: Uint8Array, maxEntries: number): Directory | undefined => {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  const floor = Math.max(0, bytes.byteLength - END_RECORD_BYTES - 0xffff)
  let end = -1
  for (let i = bytes.byteLength - END_RECORD_BYTES; i >= floor; i--) {
    if (view.getUint32(i, true) === END_OF_DIRECTORY) {
      end = i
      break
    }
  }
  if (end < 0) return undefined
  const count = view.getUint16(end + 10, true)
  const size = view.getUint32(end + 12, true)
  const offset = view.getUint32(end + 16, true)
  if (count === 0xffff || size === 0xffffffff || offset === 0xffffffff) return { entries: Infinity, declared: Infinity }
  const extra = end - (offset + size)
  if (extra < 0) return undefined
  const walk = (start: number): Directory => {
    let entries = 0
    let declared = 0
    let at = start
    while (at + RECORD_BYTES <= bytes.byteLength && view.getUint32(at, true) === DIRECTORY_RECORD) {
      entries += 1
      const unpacked = view.getUint32(at + 24, true)
      declared += unpacked === 0xffffffff ? Infinity : unpacked
      if (entries > maxEntries) break
      at += RECORD_BYTES + view.getUint16(at + 28, true) + view.getUint16(at + 30, true) +
        view.getUint16(at + 32, true)
    }
    return { entries, declared }
  }
  const direct = walk(offset)
  const shifted = extra === 0 ? direct : walk(offset + extra)
  const directory = {
    entries: Math.max(direct.entries, shifted.entries),
    declared: Math.max(direct.declared, shifted.declared)
  }
  return count > 0 && directory.entries === 0 ? undefined : directory
}
