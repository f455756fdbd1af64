/**
 * An instance's aliases as the core judges them (src/domain/instance.ts changeAliases): what an
 * alias may be, the order of clear, remove and add, and each refusal's whole sentence; then the
 * store's check of aliases in a file written by hand or before aliases existed.
 */
import { describe, expect, it } from 'vitest';
import { ALIASES_MAX, type AliasChange, type Instance, changeAliases } from '../../src/domain/instance.js';
import { ObProxyError } from '../../src/errors.js';
import { validateStoreData } from '../../src/store/store-validation.js';

const AT = '2026-11-23T12:00:00.000Z';

function instance(aliases: string[] = []): Instance {
  return {
    id: 'gpu-1',
    deployment: 'd1',
    model: 'gemma4:26b',
    endpoint: 'http://10.0.0.5:11434',
    state: 'ready',
    packEndsAt: null,
    upstreamTokenFile: null,
    aliases,
    createdAt: AT,
    updatedAt: AT,
  };
}

/** The refusal as the management API sends it. */
function refusal(aliases: string[], change: AliasChange): unknown {
  try {
    changeAliases(instance(aliases), change);
  } catch (err) {
    if (err instanceof ObProxyError) return err.toBody();
    throw err;
  }
  throw new Error('not refused');
}

function invalid(param: string, message: string) {
  return { error: { message, type: 'invalid_request_error', code: 'invalid_argument', param } };
}

describe('changeAliases', () => {
  it('takes the ids agents and model servers send', () => {
    const ids = [
      'claude-sonnet-4-5',
      'claude-3-5-haiku-20241022',
      'claude-3-5-sonnet-v2@20241022',
      'us.anthropic.claude-3-7-sonnet-20250219-v1:0',
      'Qwen/Qwen2.5-7B-Instruct',
      'hf.co/unsloth/gemma-3-27b-it-GGUF:Q4_K_M',
      'gpt-4o',
      'qwen3.6:27b',
      'a'.repeat(200),
    ];
    expect(changeAliases(instance(), { add: ids })).toEqual(ids);
  });

  it('adds in the order given, each once; an alias it has already stays where it was', () => {
    expect(changeAliases(instance(['b']), { add: ['c', 'a', 'c', 'b', 'a'] })).toEqual(['b', 'c', 'a']);
  });

  it('removes, or clears first so that the aliases added are the only ones', () => {
    expect(changeAliases(instance(['a', 'b', 'c']), { remove: ['b', 'b'] })).toEqual(['a', 'c']);
    expect(changeAliases(instance(['a', 'b']), { remove: ['a'], add: ['d'] })).toEqual(['b', 'd']);
    expect(changeAliases(instance(['a', 'b']), { clear: true })).toEqual([]);
    expect(changeAliases(instance(['a', 'b']), { clear: true, add: ['b', 'x'] })).toEqual(['b', 'x']);
    expect(changeAliases(instance(['a']), {})).toEqual(['a']);
  });

  it('refuses what is not a model id, naming the rule and an example', () => {
    const rule =
      '1-200 characters: letters, digits, and . _ : / @ + - (not first). Give the id the agent sends as model, e.g. claude-sonnet-4-5.';
    for (const bad of ['', 'two words', '-flag', 'a\u001b[2J', 'quote"', 'a'.repeat(201)]) {
      const quoted = bad.length > 120 ? `${bad.slice(0, 120)}…` : bad;
      expect(refusal([], { add: ['ok', bad] })).toEqual(
        invalid('aliases', `Alias "${quoted}" is not a model id: ${rule}`),
      );
    }
  });

  it("refuses the instance's own model, a secret, a list that is not one, and clear with remove", () => {
    expect(refusal([], { add: ['gemma4:26b'] })).toEqual(
      invalid(
        'aliases',
        '"gemma4:26b" is the model of instance gpu-1 itself: its keys send it already. An alias names another model id.',
      ),
    );
    expect(refusal([], { add: ['ob_sk_abc'] })).toEqual(
      invalid(
        'aliases',
        "An alias must not look like a key's secret (ob_sk_…, in any case): aliases are stored and shown in clear.",
      ),
    );
    expect(refusal([], { add: 'claude' })).toEqual(invalid('add', 'add must be a list of model ids.'));
    expect(refusal([], { remove: [1] })).toEqual(invalid('remove', 'remove must be a list of model ids.'));
    expect(refusal([], { clear: 'yes' })).toEqual(invalid('clear', 'clear must be true or false.'));
    expect(refusal(['a'], { clear: true, remove: ['a'] })).toEqual(
      invalid('remove', 'Give either --clear or --remove, not both: --clear takes every alias away.'),
    );
  });

  it('refuses to remove an alias the instance does not have, saying which it has', () => {
    expect(refusal(['a', 'b'], { remove: ['a', 'z'] })).toEqual(
      invalid('remove', 'Instance gpu-1 has no alias "z"; its aliases are a, b. Nothing was changed.'),
    );
    expect(refusal([], { remove: ['z'] })).toEqual(
      invalid('remove', 'Instance gpu-1 has no alias "z"; it has none. Nothing was changed.'),
    );
  });

  it(`refuses more than ${ALIASES_MAX} in all, counted after the change`, () => {
    const full = Array.from({ length: ALIASES_MAX }, (_, i) => `m${i}`);
    expect(changeAliases(instance(full), { add: ['m0'] })).toEqual(full);
    expect(changeAliases(instance(full), { remove: ['m0'], add: ['x'] })).toEqual([...full.slice(1), 'x']);
    expect(refusal(full, { add: ['x'] })).toEqual(
      invalid(
        'aliases',
        'Instance gpu-1 would have 33 aliases; it may have at most 32. Take some away with --remove, or all with --clear.',
      ),
    );
  });
});

describe('aliases in a store file', () => {
  const file = (inst: object) => ({ version: 2, instances: [inst], keys: [], events: [] });

  it('an instance written before aliases existed loads with none; one written with them keeps them', () => {
    const { aliases: _none, ...old } = instance();
    expect(validateStoreData('db.json', file(old)).instances).toEqual([instance()]);
    expect(validateStoreData('db.json', file({ ...instance(['claude-sonnet-4-5']) })).instances).toEqual([
      instance(['claude-sonnet-4-5']),
    ]);
    const event = { seq: 1, at: AT, type: 'instance.aliased', instance: 'gpu-1', aliases: ['claude-sonnet-4-5'] };
    expect(validateStoreData('db.json', { ...file(instance()), events: [event] }).events).toEqual([event]);
  });

  it('aliases that are not a list of model ids name the record and the field', () => {
    expect(() => validateStoreData('db.json', file({ ...instance(), aliases: 'claude' }))).toThrow(
      'The store db.json has a record ob-proxy cannot use: instances[0] (id "gpu-1"), field "aliases": expected a list of model ids, found "claude". ',
    );
    expect(() => validateStoreData('db.json', file({ ...instance(), aliases: ['ok', 'two words'] }))).toThrow(
      'instances[0] (id "gpu-1"), field "aliases[1]": "two words" is not a model id (1-200 characters: letters, digits, and . _ : / @ + - (not first))',
    );
  });
});
