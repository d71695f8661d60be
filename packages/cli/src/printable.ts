/**
 * Output that cannot drive the terminal: what `sluice` prints carries text it does not control (a
 * step's error, an approval prompt written by a model, a server message echoing a request), and a
 * control character in it would act instead of showing — ESC sequences clear the screen, set the
 * window title or hide text; CR overwrites the start of the line.
 */
import type { Output } from './command.js';

/** The control characters: C0, DEL and C1 (U+009B is a CSI of its own)… */
const CONTROL = /\p{Cc}/gu;
/** …but tab and line feed, which print as they should. */
const KEPT = new Set(['\t', '\n']);

/**
 * `line` with each control character as its `\uXXXX` escape: visible to people, and inside a JSON
 * string (where `--json` output has them) the same character to a JSON reader.
 */
export function printable(line: string): string {
  return line.replace(CONTROL, (c) =>
    KEPT.has(c) ? c : `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`,
  );
}

/** `output` writing only {@link printable} lines. */
export function printableOutput(output: Output): Output {
  return {
    out: (line) => output.out(printable(line)),
    err: (line) => output.err(printable(line)),
  };
}
