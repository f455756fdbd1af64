import { isObject } from './request-checks.js';

/**
 * The image, audio and file parts of a request: how many, and their encoded characters. The
 * prompt estimate (prompt-estimate.ts) counts each part as a fixed number of tokens instead of by
 * its base64 size. Counted while the gate reads the body; never a reason to refuse it.
 */
export interface Media {
  parts: number;
  chars: number;
}

export function noMedia(): Media {
  return { parts: 0, chars: 0 };
}

/** Counts one part whose payload is `payload` (a data URL or base64 text, when a string). */
export function addMedia(media: Media, payload: unknown): void {
  media.parts += 1;
  if (typeof payload === 'string') media.chars += payload.length;
}

/**
 * Counts the media parts of a list of content parts, whatever the API calls them: `kinds` maps a
 * part's `type` to the field holding its payload (`image_url` → `image_url`). A payload may be an
 * object holding `url` or `data` (chat's `{"image_url":{"url"}}`, Messages' `{"source":{"data"}}`).
 */
export function countMedia(content: unknown, kinds: Readonly<Record<string, string>>, media: Media): void {
  if (!Array.isArray(content)) return;
  for (const part of content) {
    if (!isObject(part) || typeof part.type !== 'string') continue;
    if (!Object.hasOwn(kinds, part.type)) continue;
    const field = kinds[part.type] as string;
    const payload = part[field];
    addMedia(media, isObject(payload) ? (payload.url ?? payload.data ?? payload.file_data) : payload);
  }
}
