/**
 * The guard in front of the Office converters (DOCX, XLSX, PPTX are zip archives): what an archive declares it
 * expands to, read from its central directory without inflating anything, and the OLE files (password-protected
 * or legacy binary Office files) that are not zip archives at all.
 */
import * as ZipDirectory from "../../state/ZipDirectory.js"

/**
 * The total uncompressed size the central directory of a zip archive declares (every record jszip would read), or
 * undefined when the bytes are not a zip archive. Zip64 entries count as unbounded.
 */
export const zipExpandedSize = (bytes: Uint8Array): number | undefined => ZipDirectory.read(bytes, Infinity)?.declared

/** An OLE compound file: a password-protected Office file, or one in the legacy binary format. */
export const isOleFile = (bytes: Uint8Array) =>
  bytes.byteLength >= 8 && bytes[0] === 0xd0 && bytes[1] === 0xcf && bytes[2] === 0x11 && bytes[3] === 0xe0
