/** The shapes the client's seam hands over the same on both lines. */

/** One thing a response got wrong: where (the keys down to it) and what. */
export interface SchemaIssue {
  readonly path: ReadonlyArray<PropertyKey>
  readonly message: string
}
