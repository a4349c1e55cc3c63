/** What the health probe (`HealthProbe`) reads of an answer. */

/**
 * Whether an answer says the provider is up. Any answer is, except those that say it cannot serve:
 * a 5xx, a 408 or a 429. A 401 or a 404 still comes from a provider that serves (a probe path the
 * provider lacks must not read as an outage).
 */
export const isUp = (status: number): boolean => status < 500 && status !== 408 && status !== 429
