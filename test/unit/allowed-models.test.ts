/**
 * The allowed model list's rules (src/domain/allowed-models.ts): what a change leaves, and each
 * refusal's whole sentence, nothing changed.
 */
import { describe, expect, it } from 'vitest';
import { changeAllowedModels } from '../../src/domain/allowed-models.js';
import type { Instance } from '../../src/domain/instance.js';

const AT = '2026-11-23T12:00:00.000Z';

function instance(id: string, model: string, state: Instance['state']): Instance {
  return {
    id,
    deployment: `d-${id}`,
    model,
    endpoint: null,
    state,
    packEndsAt: null,
    aliases: [],
    createdAt: AT,
    updatedAt: AT,
  };
}

const DEFAULT = ['gemma4:26b', 'qwen3.6:27b'];

function refusal(change: Parameters<typeof changeAllowedModels>[1], instances: Instance[] = []): unknown {
  try {
    changeAllowedModels(DEFAULT, change, instances);
  } catch (err) {
    const e = err as { code: string; param: string | null; message: string };
    return { code: e.code, param: e.param, message: e.message };
  }
  throw new Error('not refused');
}

describe('changeAllowedModels', () => {
  it('adds in the order given, each once, and takes away', () => {
    expect(
      changeAllowedModels(DEFAULT, { allow: ['llama3.1:8b', 'Qwen/Qwen2.5-7B-Instruct', 'llama3.1:8b'] }, []),
    ).toEqual(['gemma4:26b', 'qwen3.6:27b', 'llama3.1:8b', 'Qwen/Qwen2.5-7B-Instruct']);
    expect(changeAllowedModels(DEFAULT, { allow: ['gemma4:26b'] }, [])).toEqual(DEFAULT);
    expect(changeAllowedModels(DEFAULT, { allow: ['llama3.1:8b'], disallow: ['qwen3.6:27b'] }, [])).toEqual([
      'gemma4:26b',
      'llama3.1:8b',
    ]);
  });

  it('a terminated instance does not keep its model allowed; any other state does', () => {
    expect(
      changeAllowedModels(DEFAULT, { disallow: ['qwen3.6:27b'] }, [instance('old', 'qwen3.6:27b', 'terminated')]),
    ).toEqual(['gemma4:26b']);
    expect(
      refusal({ disallow: ['qwen3.6:27b'] }, [
        instance('gpu-2', 'qwen3.6:27b', 'stopped'),
        instance('gpu-1', 'qwen3.6:27b', 'pending'),
        instance('gpu-3', 'gemma4:26b', 'ready'),
      ]),
    ).toEqual({
      code: 'model_in_use',
      param: null,
      message:
        'qwen3.6:27b cannot be disallowed: instances gpu-1, gpu-2 run it. Terminate or remove them first (`ob-proxy instances terminate ID`). Nothing was changed.',
    });
    expect(refusal({ disallow: ['gemma4:26b'] }, [instance('gpu-3', 'gemma4:26b', 'failed')])).toEqual({
      code: 'model_in_use',
      param: null,
      message:
        'gemma4:26b cannot be disallowed: instance gpu-3 runs it. Terminate or remove it first (`ob-proxy instances terminate ID`). Nothing was changed.',
    });
  });

  it('refuses ids that are not model ids, ids it lacks, both at once, and an empty list', () => {
    expect(refusal({ allow: ['llama 3'] })).toEqual({
      code: 'invalid_argument',
      param: 'allow',
      message:
        '"llama 3" is not a model id: 1-200 characters: letters, digits, and . _ : / @ + - (not first). Give the id as the model server lists it, e.g. llama3.1:8b.',
    });
    expect(refusal({ allow: [`ob_sk_${'a'.repeat(12)}_${'b'.repeat(38)}`] })).toMatchObject({
      code: 'invalid_argument',
      message: "A model id must not look like a key's secret (ob_sk_…, in any case): model ids are shown in clear.",
    });
    expect(refusal({ disallow: ['llama3.1:8b'] })).toEqual({
      code: 'invalid_argument',
      param: 'disallow',
      message: 'llama3.1:8b is not on the allowed list (gemma4:26b, qwen3.6:27b). Nothing was changed.',
    });
    expect(refusal({ allow: ['x'], disallow: ['x'] })).toEqual({
      code: 'invalid_argument',
      param: 'disallow',
      message: 'x is both to allow and to disallow; give it once. Nothing was changed.',
    });
    expect(refusal({ disallow: DEFAULT })).toEqual({
      code: 'invalid_argument',
      param: 'disallow',
      message: 'The allowed list would be empty, and no instance could be added. Allow another model first.',
    });
    expect(refusal({ allow: Array.from({ length: 255 }, (_, i) => `m${i}`) })).toEqual({
      code: 'invalid_argument',
      param: 'allow',
      message: 'The allowed list would hold 257 models; it may hold at most 256. Disallow some first.',
    });
    expect(refusal({ allow: 'llama3.1:8b' })).toMatchObject({ message: 'allow must be a list of model ids.' });
  });
});
