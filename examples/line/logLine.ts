/** A log line as either side's `printLogLines` hands it over: its level (`INFO`), its message and its annotations. */
export interface LogLine {
  readonly level: string
  readonly message: unknown
  readonly annotations: ReadonlyArray<readonly [string, unknown]>
}
