/**
 * Custody of default-key secrets between their making and their display: memory only, handed out
 * once. `ready` makes the default key in the background and its caller (or `keys reveal`, or the
 * console) shows the secret later; a daemon that restarts meanwhile has lost it, and the operator
 * makes a new key. A secret is dropped as soon as its key can no longer be used (revoked, or its
 * instance halted or removed), so nothing shows a dead key's secret.
 */
export class UndisplayedSecrets {
  private readonly secrets = new Map<string, string>();

  keep(keyId: string, secret: string): void {
    this.secrets.set(keyId, secret);
  }

  has(keyId: string): boolean {
    return this.secrets.has(keyId);
  }

  /** The secret, once; null if it was already shown or dropped. */
  claim(keyId: string): string | null {
    const secret = this.secrets.get(keyId);
    if (secret === undefined) return null;
    this.secrets.delete(keyId);
    return secret;
  }

  drop(keys: Iterable<{ id: string }>): void {
    for (const k of keys) this.secrets.delete(k.id);
  }
}
