import type { PoolClient } from 'pg';
import { obError } from '../../errors.js';

/** The allowed model list the database holds, inside the writer's transaction; null: never set. */
async function storedModels(client: PoolClient, lock: boolean): Promise<string[] | null> {
  const { rows } = await client.query<{ value: string[] }>(
    `SELECT value FROM ob_settings WHERE name = 'models'${lock ? ' FOR UPDATE' : ''}`,
  );
  return rows[0]?.value ?? null;
}

/**
 * Replaces the allowed list, unless another daemon changed it since `prev` was read (its own
 * `instances add` would otherwise check a list no daemon decided), or an instance that is not
 * terminated runs a model taken away: one added through another daemon the deciding daemon had
 * not heard of yet.
 */
export async function setModels(
  client: PoolClient,
  models: readonly string[],
  prev: readonly string[] | null,
  disallowed: readonly string[],
): Promise<void> {
  const stored = await storedModels(client, true);
  if (JSON.stringify(stored) !== JSON.stringify(prev)) {
    throw obError('invalid_transition', {
      message: `The allowed models were changed through another daemon meanwhile (${stored === null ? 'none stored' : `now ${stored.join(', ')}`}); nothing was changed. Look again with \`ob-proxy models list\` and retry.`,
    });
  }
  if (disallowed.length > 0) {
    const { rows } = await client.query<{ id: string; model: string }>(
      `SELECT id, record->>'model' AS model FROM ob_instances
       WHERE state <> 'terminated' AND record->>'model' = ANY($1::text[]) ORDER BY id`,
      [disallowed],
    );
    if (rows.length > 0) {
      throw obError('model_in_use', {
        message: `${rows[0]!.model} cannot be disallowed: instance ${rows.map((r) => r.id).join(', ')} was added with it through another daemon meanwhile. Nothing was changed.`,
      });
    }
  }
  await client.query(
    `INSERT INTO ob_settings (name, value) VALUES ('models', $1) ON CONFLICT (name) DO UPDATE SET value = $1`,
    [JSON.stringify(models)],
  );
}

/** An instance added only with a model the database allows, when it holds a list. */
export async function assertAllowed(client: PoolClient, model: string): Promise<void> {
  const stored = await storedModels(client, false);
  if (stored !== null && !stored.includes(model)) {
    throw obError('unknown_model', {
      param: 'model',
      message: `Model "${model}" was disallowed through another daemon meanwhile: the allowed models are ${stored.join(', ')}. Nothing was changed.`,
    });
  }
}
