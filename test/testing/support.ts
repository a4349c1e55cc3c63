/**
 * What the fault server tests share: a plain fetch against the server, its body as text or JSON,
 * and reading a body that stalls or is cut by a reset.
 */
import type { FaultServer } from "@resilient-ai/testing"
import { Effect } from "effect"

/** A network failure as fetch reports it: a `TypeError` whose cause carries the socket's code. */
export interface FetchFailure {
  readonly name: string
  readonly message: string
  readonly cause?: { readonly code?: string } | undefined
}

/** POSTs JSON (or raw text) to `path` under the server's base URL. */
export const post = (
  server: FaultServer.Service,
  path: string,
  body: unknown,
  init: { readonly headers?: Record<string, string>; readonly signal?: AbortSignal } = {}
) =>
  Effect.tryPromise({
    try: () =>
      fetch(`${server.url}${path}`, {
        method: "POST",
        headers: { "content-type": "application/json", ...init.headers },
        body: typeof body === "string" ? body : JSON.stringify(body),
        ...(init.signal === undefined ? {} : { signal: init.signal })
      }),
    catch: (error) => error as FetchFailure
  })

export const text = (response: Response) =>
  Effect.tryPromise({ try: () => response.text(), catch: (error) => error as FetchFailure })

export const json = (response: Response) => Effect.map(text(response), (body): any => JSON.parse(body))

/**
 * What a reset in the middle of a response shows to the reading side. Usually the kernel reports
 * the RST to the read: ECONNRESET. When part of the response came first, the read now and then
 * sees the end of the stream instead (with both cores busy: a raw `net` socket 1 time in 1000 after
 * a broken stream, fetch 1 in 150; undici calls it "other side closed", UND_ERR_SOCKET). Both say
 * the connection ended under the response, which is all a reset means to a client (`Transport`
 * maps both to `ConnectionReset`). EPIPE and the like come from writing, and the client has
 * written its whole request before any of these faults. A reset before any byte of the response
 * (ResetHeaders) showed ECONNRESET every time (1150 of 1150), so that test still tells it from the
 * FIN of `Close`.
 */
export const resetCodes = ["ECONNRESET", "UND_ERR_SOCKET"]

/** Reads a body until `enough` holds of the text received so far, or the body ends. */
export const readUntil = (response: Response, enough: (received: string) => boolean) =>
  Effect.promise(async () => {
    const reader = response.body!.getReader()
    const decoder = new TextDecoder()
    let received = ""
    while (!enough(received)) {
      const next = await reader.read()
      if (next.done) break
      received += decoder.decode(next.value, { stream: true })
    }
    return received
  })

/** Reads a body to its end, or to the failure that cut it, with what arrived before. */
export const readAll = (response: Response) =>
  Effect.promise(async () => {
    const reader = response.body!.getReader()
    const decoder = new TextDecoder()
    let received = ""
    try {
      for (;;) {
        const next = await reader.read()
        if (next.done) return { received, failure: undefined }
        received += decoder.decode(next.value, { stream: true })
      }
    } catch (error) {
      return { received, failure: error as FetchFailure }
    }
  })
