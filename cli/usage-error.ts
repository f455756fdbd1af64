/** A mistake in how the command was called: exit 2. */
export class UsageError extends Error {}
