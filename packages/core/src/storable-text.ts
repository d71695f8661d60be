/**
 * Text for people (an error message, a progress note) as Postgres can store it: `text` and `jsonb`
 * cannot hold the character U+0000, and `jsonb` refuses a lone UTF-16 surrogate (what is left of an
 * emoji cut in half by a length limit); one such value fails its whole statement (in a group
 * write, the outcomes of other steps with it). Each is shown as U+FFFD, the replacement character.
 * Data (inputs, outputs) is refused instead, where it is checked, rather than changed.
 */
export function storableText(text: string): string {
  const withoutNul = text.includes('\u0000') ? text.replaceAll('\u0000', '\uFFFD') : text;
  return withoutNul.replace(LONE_SURROGATES, '\uFFFD');
}

/** With the `u` flag a surrogate pair is one code point: the class matches lone halves only. */
const LONE_SURROGATES = /[\uD800-\uDFFF]/gu;
const LONE_SURROGATE = /[\uD800-\uDFFF]/u;

/**
 * What in `text` Postgres cannot store: U+0000 (`nul`), or a lone UTF-16 surrogate
 * (`lone_surrogate`); `undefined` when it can store all of it. For data, which is refused rather
 * than changed.
 */
export function unstorableCharacter(text: string): 'nul' | 'lone_surrogate' | undefined {
  if (text.includes('\u0000')) return 'nul';
  if (LONE_SURROGATE.test(text)) return 'lone_surrogate';
  return undefined;
}
