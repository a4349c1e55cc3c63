/**
 * SHA-256 (FIPS 180-4) in plain JavaScript: synchronous and free of any runtime's crypto module, so
 * the fingerprint of an API key is the same value in Node, Deno, Bun, a worker or a browser.
 *
 * @internal
 */

// The first 32 bits of the fractional parts of the cube roots of the first 64 primes.
const rounds = new Uint32Array([
  0x428a2f98,
  0x71374491,
  0xb5c0fbcf,
  0xe9b5dba5,
  0x3956c25b,
  0x59f111f1,
  0x923f82a4,
  0xab1c5ed5,
  0xd807aa98,
  0x12835b01,
  0x243185be,
  0x550c7dc3,
  0x72be5d74,
  0x80deb1fe,
  0x9bdc06a7,
  0xc19bf174,
  0xe49b69c1,
  0xefbe4786,
  0x0fc19dc6,
  0x240ca1cc,
  0x2de92c6f,
  0x4a7484aa,
  0x5cb0a9dc,
  0x76f988da,
  0x983e5152,
  0xa831c66d,
  0xb00327c8,
  0xbf597fc7,
  0xc6e00bf3,
  0xd5a79147,
  0x06ca6351,
  0x14292967,
  0x27b70a85,
  0x2e1b2138,
  0x4d2c6dfc,
  0x53380d13,
  0x650a7354,
  0x766a0abb,
  0x81c2c92e,
  0x92722c85,
  0xa2bfe8a1,
  0xa81a664b,
  0xc24b8b70,
  0xc76c51a3,
  0xd192e819,
  0xd6990624,
  0xf40e3585,
  0x106aa070,
  0x19a4c116,
  0x1e376c08,
  0x2748774c,
  0x34b0bcb5,
  0x391c0cb3,
  0x4ed8aa4a,
  0x5b9cca4f,
  0x682e6ff3,
  0x748f82ee,
  0x78a5636f,
  0x84c87814,
  0x8cc70208,
  0x90befffa,
  0xa4506ceb,
  0xbef9a3f7,
  0xc67178f2
])

// The first 32 bits of the fractional parts of the square roots of the first 8 primes.
const initial = [0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19]

const rotr = (x: number, n: number): number => (x >>> n) | (x << (32 - n))

/** The SHA-256 digest of `bytes`: 32 bytes. */
export const sha256 = (bytes: Uint8Array): Uint8Array => {
  // The message, a 1 bit, zeros, and its length in bits as 64 bits: a whole number of 64-byte blocks.
  const length = bytes.length
  const padded = new Uint8Array(Math.ceil((length + 9) / 64) * 64)
  padded.set(bytes)
  padded[length] = 0x80
  const view = new DataView(padded.buffer)
  // Bits beyond 2^32 do not fit a 32-bit write: the high word takes them.
  view.setUint32(padded.length - 8, Math.floor(length / 0x20000000))
  view.setUint32(padded.length - 4, (length << 3) >>> 0)

  const hash = initial.slice()
  const words = new Uint32Array(64)
  for (let block = 0; block < padded.length; block += 64) {
    for (let t = 0; t < 16; t++) words[t] = view.getUint32(block + t * 4)
    for (let t = 16; t < 64; t++) {
      const w15 = words[t - 15]!
      const w2 = words[t - 2]!
      const s0 = rotr(w15, 7) ^ rotr(w15, 18) ^ (w15 >>> 3)
      const s1 = rotr(w2, 17) ^ rotr(w2, 19) ^ (w2 >>> 10)
      words[t] = (words[t - 16]! + s0 + words[t - 7]! + s1) | 0
    }
    let a = hash[0]!, b = hash[1]!, c = hash[2]!, d = hash[3]!
    let e = hash[4]!, f = hash[5]!, g = hash[6]!, h = hash[7]!
    for (let t = 0; t < 64; t++) {
      const s1 = rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)
      const choice = (e & f) ^ (~e & g)
      const t1 = (h + s1 + choice + rounds[t]! + words[t]!) | 0
      const s0 = rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)
      const majority = (a & b) ^ (a & c) ^ (b & c)
      const t2 = (s0 + majority) | 0
      h = g
      g = f
      f = e
      e = (d + t1) | 0
      d = c
      c = b
      b = a
      a = (t1 + t2) | 0
    }
    hash[0] = (hash[0]! + a) | 0
    hash[1] = (hash[1]! + b) | 0
    hash[2] = (hash[2]! + c) | 0
    hash[3] = (hash[3]! + d) | 0
    hash[4] = (hash[4]! + e) | 0
    hash[5] = (hash[5]! + f) | 0
    hash[6] = (hash[6]! + g) | 0
    hash[7] = (hash[7]! + h) | 0
  }
  const digest = new Uint8Array(32)
  const out = new DataView(digest.buffer)
  for (let index = 0; index < 8; index++) out.setUint32(index * 4, hash[index]! >>> 0)
  return digest
}

/** Lowercase hexadecimal of `bytes`. */
export const hex = (bytes: Uint8Array): string => {
  let text = ""
  for (let index = 0; index < bytes.length; index++) text += bytes[index]!.toString(16).padStart(2, "0")
  return text
}

/** `text` in UTF-8, a lone surrogate as U+FFFD (as `TextEncoder` does, which not every runtime's types declare). */
const utf8 = (text: string): Uint8Array => {
  const bytes: Array<number> = []
  for (let index = 0; index < text.length; index++) {
    let code = text.charCodeAt(index)
    if (code >= 0xd800 && code <= 0xdfff) {
      const next = text.charCodeAt(index + 1)
      if (code <= 0xdbff && next >= 0xdc00 && next <= 0xdfff) {
        code = 0x10000 + ((code - 0xd800) << 10) + (next - 0xdc00)
        index++
      } else {
        code = 0xfffd
      }
    }
    if (code < 0x80) bytes.push(code)
    else if (code < 0x800) bytes.push(0xc0 | (code >> 6), 0x80 | (code & 0x3f))
    else if (code < 0x10000) bytes.push(0xe0 | (code >> 12), 0x80 | ((code >> 6) & 0x3f), 0x80 | (code & 0x3f))
    else {
      bytes.push(0xf0 | (code >> 18), 0x80 | ((code >> 12) & 0x3f), 0x80 | ((code >> 6) & 0x3f), 0x80 | (code & 0x3f))
    }
  }
  return new Uint8Array(bytes)
}

/** The SHA-256 digest of `text`'s UTF-8 bytes, in lowercase hexadecimal. */
export const sha256Hex = (text: string): string => hex(sha256(utf8(text)))
