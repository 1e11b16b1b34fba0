/**
 * The guard in front of the Office converters (DOCX, XLSX, PPTX are zip archives): what an archive declares it
 * expands to, read from its central directory without inflating anything, and the OLE files (password-protected
 * or legacy binary Office files) that are not zip archives at all.
 */

/**
 * The total uncompressed size the central directory of a zip archive declares, or undefined when the bytes
 * are not a zip archive (no end-of-central-directory record). Zip64 entries count as unbounded.
 */
export const zipExpandedSize = (bytes: Uint8Array): number | undefined => {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  const floor = Math.max(0, bytes.byteLength - 22 - 0xffff)
  let end = -1
  for (let i = bytes.byteLength - 22; i >= floor; i--) {
    if (view.getUint32(i, true) === 0x06054b50) {
      end = i
      break
    }
  }
  if (end < 0) return undefined
  const entries = view.getUint16(end + 10, true)
  let offset = view.getUint32(end + 16, true)
  if (entries === 0xffff || offset === 0xffffffff) return Infinity
  let total = 0
  for (let n = 0; n < entries; n++) {
    if (offset + 46 > bytes.byteLength || view.getUint32(offset, true) !== 0x02014b50) return undefined
    const size = view.getUint32(offset + 24, true)
    if (size === 0xffffffff) return Infinity
    total += size
    const variable = view.getUint16(offset + 28, true) + view.getUint16(offset + 30, true) +
      view.getUint16(offset + 32, true)
    offset += 46 + variable
  }
  return total
}

/** An OLE compound file: a password-protected Office file, or one in the legacy binary format. */
export const isOleFile = (bytes: Uint8Array) =>
  bytes.byteLength >= 8 && bytes[0] === 0xd0 && bytes[1] === 0xcf && bytes[2] === 0x11 && bytes[3] === 0xe0
