import {
  type AddressSetting,
  type ChoiceSetting,
  type ConfigFlags,
  type Env,
  type NumberSetting,
  SETTINGS,
  type Setting,
  type SettingName,
} from './config.js';
import { obError } from './errors.js';
import { clipped } from './printable.js';

/** One setting's value: where it was given, how it is read, and how a refusal names it. */

const MiB = 1024 * 1024;

/** The value given, flag first, then variable; an empty one counts as not given. */
export function givenValue(name: SettingName, flags: ConfigFlags, env: Env): string | undefined {
  const s: Setting = SETTINGS[name];
  const flag =
    s.flag === undefined ? undefined : (flags as Readonly<Record<string, string | number | undefined>>)[name];
  if (flag !== undefined && flag !== '') return String(flag);
  const raw = env[s.env];
  return raw === undefined || raw === '' ? undefined : raw;
}

/**
 * How an error names a setting: the flag and the variable that also sets it, as the operator may
 * have used either (`--port (or OB_PROXY_PORT)`); a setting read from the environment only is
 * named by its variable.
 */
export function settingLabel(s: Setting): string {
  return s.flag === undefined ? s.env : `--${s.flag} (or ${s.env})`;
}

export function refuse(s: Setting, message: string): never {
  throw obError('invalid_argument', { param: s.flag ?? s.env, message });
}

/** The default as `--help` and docs/cli.md say it. */
export function shownDefault(s: Setting): string {
  if (s.shown !== undefined) return s.shown;
  if (s.type === 'text') return '';
  if (s.type !== 'number' || s.default === null) return String(s.default);
  const n = s.default;
  if (s.unit === 'bytes') return n % MiB === 0 ? `${n / MiB} MiB` : n % 1024 === 0 ? `${n / 1024} KiB` : `${n} bytes`;
  if (s.unit === 'seconds') return `${n} s`;
  if (s.unit === 'milliseconds') return `${n} ms`;
  return String(n);
}

export function readNumber(s: NumberSetting, raw: string | undefined): number | null {
  if (raw === undefined) return s.default;
  const n = raw.trim() === '' ? NaN : Number(raw);
  if (!Number.isFinite(n) || n < s.min || n > s.max || (s.integer === true && !Number.isInteger(n))) {
    const unit = s.unit === undefined ? '' : ` of ${s.unit}`;
    refuse(
      s,
      `${settingLabel(s)} must be a number${unit} from ${s.min} to ${s.max}${s.integer === true ? ', without a fraction' : ''}, got "${clipped(raw)}".`,
    );
  }
  return n;
}

export function readChoice(s: ChoiceSetting, raw: string | undefined, fallback = s.default): string | null {
  if (raw === undefined) return fallback;
  if (!s.choices.includes(raw)) {
    const choices = s.choices.length === 2 ? `${s.choices[0]} or ${s.choices[1]}` : `one of ${s.choices.join(', ')}`;
    refuse(s, `${settingLabel(s)} must be ${choices}, got "${clipped(raw)}".`);
  }
  return raw;
}

export function readAddress(s: AddressSetting, raw: string | undefined): string {
  if (raw === undefined) return s.default;
  if (!/^(\[[0-9A-Fa-f:.%\w]+\]|[0-9A-Za-z.:%_-]+)$/.test(raw)) {
    refuse(
      s,
      `${settingLabel(s)} must be an address to listen on, such as 127.0.0.1, 0.0.0.0 or ::, got "${clipped(raw)}".`,
    );
  }
  return raw.startsWith('[') ? raw.slice(1, -1) : raw;
}
