/**
 * Parsing the documents of the `document-ingestion` sample into rows: CSV (RFC 4180: a header
 * row, quoted fields with `""` escapes and line breaks, CRLF or LF), JSON (an array of objects, or
 * one object) and plain text (one row per non-empty line).
 *
 * The parsers are zod schemas from text to rows, so a malformed document fails its step as
 * `schema_validation` with the place of the problem — it is the document that is wrong, and
 * retrying cannot help.
 */
import { z } from 'zod';

/** Most rows one document may have. */
export const MAX_ROWS = 1_000;
/** Most columns one row may have. */
export const MAX_COLUMNS = 100;

/** One cell: what JSON documents may hold; CSV and text cells are strings. */
export type Cell = string | number | boolean | null;
/** A parsed document. */
export interface ParsedDocument {
  readonly columns: string[];
  readonly rows: Array<Record<string, Cell>>;
}

/** The formats the sample reads. */
export const DOCUMENT_FORMATS = ['csv', 'json', 'text'] as const;
export type DocumentFormat = (typeof DOCUMENT_FORMATS)[number];

/** A CSV text as records, or the problem at its line. */
export function parseCsv(text: string): { records: string[][] } | { problem: string } {
  const records: string[][] = [];
  let record: string[] = [];
  let field = '';
  let quoted = false;
  let line = 1;
  let i = text.startsWith('\uFEFF') ? 1 : 0; // a byte order mark is not data
  const endField = () => {
    record.push(field);
    field = '';
  };
  const endRecord = () => {
    endField();
    // A blank line is not a record (`[""]`), even between records.
    if (!(record.length === 1 && record[0] === '')) records.push(record);
    record = [];
  };
  for (; i < text.length; i += 1) {
    const char = text[i];
    if (quoted) {
      if (char === '"') {
        if (text[i + 1] === '"') {
          field += '"';
          i += 1;
        } else {
          quoted = false;
          const after = text[i + 1];
          if (after !== undefined && after !== ',' && after !== '\n' && after !== '\r') {
            return { problem: `line ${line}: text after a closing quote` };
          }
        }
      } else {
        if (char === '\n') line += 1;
        field += char;
      }
    } else if (char === '"') {
      if (field !== '') return { problem: `line ${line}: a quote inside an unquoted field` };
      quoted = true;
    } else if (char === ',') {
      endField();
    } else if (char === '\n' || char === '\r') {
      if (char === '\r' && text[i + 1] === '\n') i += 1;
      endRecord();
      line += 1;
    } else {
      field += char;
    }
  }
  if (quoted) return { problem: `line ${line}: a quoted field is not closed` };
  if (field !== '' || record.length > 0) endRecord();
  return { records };
}

/** CSV with a header row, as rows keyed by the header. */
const csvDocument = z.string().transform((text, ctx): ParsedDocument => {
  const parsed = parseCsv(text);
  if ('problem' in parsed) {
    ctx.addIssue({ code: 'custom', message: `not CSV: ${parsed.problem}` });
    return z.NEVER;
  }
  const [header, ...records] = parsed.records;
  if (!header) {
    ctx.addIssue({ code: 'custom', message: 'CSV without a header row' });
    return z.NEVER;
  }
  const columns = header.map((name) => name.trim());
  if (columns.some((name) => name === '') || new Set(columns).size !== columns.length) {
    ctx.addIssue({ code: 'custom', message: 'CSV header names must be unique and not empty' });
    return z.NEVER;
  }
  const rows: Array<Record<string, Cell>> = [];
  for (const [index, record] of records.entries()) {
    if (record.length !== columns.length) {
      ctx.addIssue({
        code: 'custom',
        message: `CSV record ${index + 1} has ${record.length} fields; the header has ${columns.length}`,
      });
      return z.NEVER;
    }
    rows.push(Object.fromEntries(columns.map((name, n) => [name, record[n] ?? ''])));
  }
  return { columns, rows };
});

const jsonCell = z.union([z.string(), z.number(), z.boolean(), z.null()]);
const jsonRow = z.record(z.string().min(1), jsonCell);

/** JSON: an array of flat objects, or one flat object. */
const jsonDocument = z
  .string()
  .transform((text, ctx): unknown => {
    try {
      return JSON.parse(text);
    } catch (error) {
      ctx.addIssue({ code: 'custom', message: `not JSON: ${(error as Error).message}` });
      return z.NEVER;
    }
  })
  .pipe(z.union([z.array(jsonRow), jsonRow.transform((row) => [row])]))
  .transform((rows): ParsedDocument => {
    const columns = [...new Set(rows.flatMap((row) => Object.keys(row)))];
    return { columns, rows };
  });

/** Text: one row per non-empty line, with its line number and word count. */
const textDocument = z.string().transform((text): ParsedDocument => ({
  columns: ['line', 'text', 'words'],
  rows: text
    .split(/\r?\n/)
    .map((line, index) => ({ line: index + 1, text: line.trim() }))
    .filter((row) => row.text !== '')
    .map((row) => ({ ...row, words: row.text.split(/\s+/).length })),
}));

/** Bounds every format shares. */
const bounded = z
  .custom<ParsedDocument>()
  .refine((doc) => doc.rows.length <= MAX_ROWS, `a document may have at most ${MAX_ROWS} rows`)
  .refine(
    (doc) => doc.columns.length <= MAX_COLUMNS,
    `a document may have at most ${MAX_COLUMNS} columns`,
  );

const PARSERS: Readonly<Record<DocumentFormat, z.ZodType<ParsedDocument, string>>> = {
  csv: csvDocument.pipe(bounded),
  json: jsonDocument.pipe(bounded),
  text: textDocument.pipe(bounded),
};

/**
 * Parses `text` as `format`.
 *
 * @throws ZodError describing what is wrong with the document.
 */
export function parseDocument(format: DocumentFormat, text: string): ParsedDocument {
  return PARSERS[format].parse(text);
}
