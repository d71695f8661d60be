/**
 * Readable terminal output for `npm run demo` and `npm start` (TypeScript, unlike the preparation
 * helpers beside it, since it runs after dependencies are installed): optional colour, shortening,
 * a plain text table. Colour only when stdout is a terminal and `NO_COLOR` is not set, so piped
 * output and CI logs stay plain text.
 */
import { styleText } from 'node:util';

/** The styles in use. */
export type Style = 'bold' | 'dim' | 'red' | 'green' | 'yellow' | 'blue' | 'magenta' | 'cyan';

const colour = process.stdout.isTTY === true && !process.env['NO_COLOR'];

/** `text` in `style` when writing to a colour terminal, unchanged otherwise. */
export function paint(style: Style, text: string): string {
  return colour ? styleText(style, text) : text;
}

/** `text` cut to `width` characters, ending in `…` when it was longer. */
export function shorten(text: string, width: number): string {
  const flat = text.replace(/\s+/g, ' ').trim();
  if (flat.length <= width) return flat;
  return width <= 1 ? flat.slice(0, width) : `${flat.slice(0, width - 1)}…`;
}

/** One cell of a {@link renderTable} row: plain text, and optionally the style to show it in. */
export interface Cell {
  readonly text: string;
  readonly style?: Style;
}

/**
 * A table with a header row, columns as wide as their widest cell (the last one unpadded), and a
 * rule under the header. Widths are measured on the plain text, then the cells are painted.
 */
export function renderTable(header: readonly string[], rows: readonly (readonly Cell[])[]): string {
  const widths = header.map((title, i) =>
    Math.max(title.length, ...rows.map((row) => row[i]?.text.length ?? 0)),
  );
  const line = (cells: readonly Cell[]) =>
    cells
      .map((cell, i) => {
        const text = i === cells.length - 1 ? cell.text : cell.text.padEnd(widths[i] ?? 0);
        return cell.style ? paint(cell.style, text) : text;
      })
      .join('  ')
      .trimEnd();
  return [
    paint('bold', line(header.map((text) => ({ text })))),
    paint('dim', widths.map((w) => '─'.repeat(w)).join('  ')),
    ...rows.map(line),
  ].join('\n');
}

/** A database URL with its password replaced, for printing. */
export function redactUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = '***';
    return parsed.href;
  } catch {
    return url;
  }
}

/**
 * NATS server URLs (one, or several separated by commas, as NATS_URL takes them) with their
 * credentials replaced, for printing: a user and password, or a token in the user's place
 * (`nats://<token>@host`), so the whole user part goes.
 */
export function redactNatsUrl(urls: string): string {
  return urls
    .split(',')
    .map((member) => {
      const url = member.trim();
      try {
        const parsed = new URL(url);
        if (parsed.username === '' && parsed.password === '') return url;
        parsed.username = '***';
        parsed.password = '';
        return parsed.href;
      } catch {
        return url.replace(/\/\/[^@/]*@/, '//***@');
      }
    })
    .join(',');
}
