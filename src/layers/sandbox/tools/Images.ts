/** The images `view_image` accepts: types by extension, the size limit, and the type the bytes really are. */

/** Image types view_image accepts, by extension. */
export const IMAGE_TYPES: Readonly<Record<string, string>> = {
  ".jpg": "image/jpeg",
  ".jpeg": "image/jpeg",
  ".png": "image/png",
  ".webp": "image/webp",
  ".gif": "image/gif"
}

/** The largest image view_image accepts. */
export const MAX_IMAGE_BYTES = 20 * 1024 * 1024

/** The image type the bytes really are (magic bytes), if any of IMAGE_TYPES. */
export const sniffImage = (bytes: Uint8Array): string | undefined => {
  const starts = (...sig: Array<number>) => sig.every((b, i) => bytes[i] === b)
  if (starts(0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a)) return "image/png"
  if (starts(0xff, 0xd8, 0xff)) return "image/jpeg"
  const at = (offset: number, text: string) => [...text].every((c, i) => bytes[offset + i] === c.charCodeAt(0))
  if (at(0, "GIF87a") || at(0, "GIF89a")) return "image/gif"
  if (at(0, "RIFF") && at(8, "WEBP")) return "image/webp"
  return undefined
}

/** The lower-case extension of a path's last segment (with its dot), or empty. */
export const extensionOf = (path: string): string => {
  const name = path.slice(path.lastIndexOf("/") + 1)
  const dot = name.lastIndexOf(".")
  return dot <= 0 ? "" : name.slice(dot).toLowerCase()
}
