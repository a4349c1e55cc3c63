/** Bytes read in parts, put together: a body read as it arrived. */

/** The `parts` of a body, `size` bytes in all, as one array. */
export const concat = (parts: ReadonlyArray<Uint8Array>, size: number): Uint8Array<ArrayBuffer> => {
  const whole = new Uint8Array(size)
  let offset = 0
  for (const part of parts) {
    whole.set(part, offset)
    offset += part.byteLength
  }
  return whole
}
