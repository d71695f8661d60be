/**
 * Text for people (an error message, a progress note) as Postgres can store it: `text` and `jsonb`
 * cannot hold the character U+0000, and `jsonb` refuses a lone UTF-16 surrogate (what is left of an
 * emoji cut in half by a length limit); one such value fails its whole statement (in a group
 * write, the outcomes of other steps with it). Each is shown as U+FFFD, the replacement character.
 * Data (inputs, outputs) is refused instead, where it is checked, rather than changed.
 */
export function storableText(text: string): string {
  const withoutNul = text.includes('\u0000') ? text.replaceAll('\u0000', '\uFFFD') : text;
  // With the `u` flag a surrogate pair is one code point: the class matches lone halves only.
  return withoutNul.replace(/[\uD800-\uDFFF]/gu, '\uFFFD');
}
