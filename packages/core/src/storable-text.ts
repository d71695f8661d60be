/**
 * Text for people (an error message, a progress note) as Postgres can store it: `text` and `jsonb`
 * cannot hold the character U+0000, and one such value fails its whole statement (in a group
 * write, the outcomes of other steps with it). It is shown as U+FFFD, the replacement character.
 * Data (inputs, outputs) is refused instead, where it is checked, rather than changed.
 */
export function storableText(text: string): string {
  return text.includes('\u0000') ? text.replaceAll('\u0000', '\uFFFD') : text;
}
