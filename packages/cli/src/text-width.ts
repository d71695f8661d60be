/**
 * How many terminal cells a text takes, to line columns up: a table's cells are padded to a width
 * in cells, not in UTF-16 code units (`String.length`), which a CJK error message (two cells a
 * character) or an accent written as a combining mark (none) throw off.
 */

/** Graphemes: what a terminal draws as one character (`é` as e + accent, 👩‍💻, a flag). */
const graphemes = new Intl.Segmenter(undefined, { granularity: 'grapheme' });

/** Starts with an East Asian Wide or Fullwidth character (Unicode UAX #11), by its blocks. */
const WIDE =
  /^[\u1100-\u115f\u2329\u232a\u2e80-\u303e\u3041-\u33ff\u3400-\u4dbf\u4e00-\u9fff\ua000-\ua4cf\ua960-\ua97f\uac00-\ud7a3\uf900-\ufaff\ufe10-\ufe19\ufe30-\ufe6f\uff00-\uff60\uffe0-\uffe6\u{16fe0}-\u{18aff}\u{1b000}-\u{1b2ff}\u{1f200}-\u{1f2ff}\u{20000}-\u{3fffd}]/u;

/** An emoji drawn as one (two cells wide), or a symbol asking to be drawn as one (U+FE0F). */
const EMOJI = /\p{Emoji_Presentation}|\p{Extended_Pictographic}\uFE0F/u;

/** Nothing a terminal advances for: marks, format and control characters alone. */
const ZERO_WIDTH = /^[\p{Mn}\p{Me}\p{Cf}\p{Cc}]+$/u;

/** The cells `text` takes in a terminal. */
export function displayWidth(text: string): number {
  if (/^[\x20-\x7e]*$/.test(text)) return text.length;
  let width = 0;
  for (const { segment } of graphemes.segment(text)) {
    if (ZERO_WIDTH.test(segment)) continue;
    width += WIDE.test(segment) || EMOJI.test(segment) ? 2 : 1;
  }
  return width;
}

/** `text` padded with spaces to `width` cells (as it is when it is as wide or wider). */
export function padToWidth(text: string, width: number): string {
  return text + ' '.repeat(Math.max(0, width - displayWidth(text)));
}
