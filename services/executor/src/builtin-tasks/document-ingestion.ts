/**
 * The built-in sample task type `document-ingestion`: a batch of documents parsed in parallel and
 * written to a database.
 *
 * 1. `split` (`file`): one fan-out branch per document.
 * 2. `parse` (`file`), one per branch: reads the document — inline `content`, or downloaded from its
 *    `url` — and parses it as CSV, JSON or text into rows (see `document-formats.ts`); a document
 *    that does not parse fails the task as `schema_validation`. The branch continues with…
 * 3. `store` (`db`): writes the rows to `sluice_samples.ingested_rows` (see `sample-store.ts`),
 *    keyed by task, document and row, so a retried write inserts nothing twice. The branch
 *    completes with its counts.
 * 4. `report` (`db`), the join: totals per document, checked against what the table holds.
 *
 * The `db` steps write to real Postgres, not Sluice's tables: a schema of their own in the database
 * `SLUICE_SAMPLES_DATABASE_URL` names (default: the executor's `DATABASE_URL`).
 */
import { z } from 'zod';
import { branch, complete, defineTask, fanOut, joinInput, next } from '@sluice/sdk';
import { DOCUMENT_FORMATS, parseDocument } from './document-formats.js';
import { SAMPLE_TABLE, countTaskRows, writeDocumentRows } from './sample-store.js';
import { MAX_BODY_BYTES, fetchPage, httpUrl } from './web-page.js';

/** Largest inline document, in characters. */
export const MAX_INLINE_CHARS = 64 * 1024;

const documentName = z.string().min(1).max(200);
const format = z.enum(DOCUMENT_FORMATS);

/** A document given inline, or by URL (strict objects: exactly one of the two). */
const document = z.union([
  z.strictObject({ name: documentName, format, content: z.string().max(MAX_INLINE_CHARS) }),
  z.strictObject({ name: documentName, format, url: httpUrl }),
]);

/** A downloaded document must be whole (a cut one would parse into wrong rows). */
const wholeDownload = z.object({
  truncated: z.literal(false, `a downloaded document may have at most ${MAX_BODY_BYTES} bytes`),
});

const cell = z.union([z.string(), z.number(), z.boolean(), z.null()]);

/** What each branch completes with. */
const stored = z.object({
  document: z.number().int(),
  name: z.string(),
  rows: z.number().int(),
  inserted: z.number().int(),
  existing: z.number().int(),
});

export const documentIngestion = defineTask({
  name: 'document-ingestion',
  version: 1,
  description:
    'Parse a batch of CSV, JSON and text documents in parallel and write their rows to Postgres.',
  input: z.object({ documents: z.array(document).min(1).max(50) }),
  firstStep: 'split',
  steps: {
    split: { resource: 'file', timeoutMs: 10_000, maxAttempts: 2 },
    parse: {
      resource: 'file',
      timeoutMs: 30_000,
      maxAttempts: 3,
      input: z.object({ document: z.number().int().min(0) }),
      output: z.object({
        name: z.string(),
        format,
        rows: z.number().int(),
        columns: z.array(z.string()),
      }),
    },
    store: {
      resource: 'db',
      timeoutMs: 30_000,
      maxAttempts: 5,
      input: z.object({
        document: z.number().int().min(0),
        rows: z.array(z.record(z.string(), cell)),
      }),
    },
    report: { resource: 'db', timeoutMs: 30_000, maxAttempts: 3, input: joinInput(stored) },
  },
  handlers: {
    split(ctx) {
      const { documents } = ctx.taskInput;
      return fanOut(
        documents.map((_, index) => branch('parse', { document: index })),
        'report',
        { documents: documents.length },
      );
    },

    async parse(ctx) {
      const index = ctx.input.document;
      const doc = ctx.taskInput.documents[index];
      if (!doc) throw new RangeError(`the task has no document ${index}`);
      let text: string;
      if ('content' in doc) {
        text = doc.content;
      } else {
        void ctx.progress(0, `downloading ${doc.url}`);
        const page = await fetchPage(doc.url, {
          signal: ctx.signal,
          idempotencyKey: ctx.idempotencyKey,
        });
        wholeDownload.parse(page);
        // The body as received: a CSV or JSON file must not go through HTML-to-text.
        text = page.body;
      }
      void ctx.progress(0.5, `parsing ${doc.name} as ${doc.format}`);
      const parsed = parseDocument(doc.format, text);
      ctx.logger.info({ document: doc.name, rows: parsed.rows.length }, 'document parsed');
      return next(
        'store',
        { document: index, rows: parsed.rows },
        { name: doc.name, format: doc.format, rows: parsed.rows.length, columns: parsed.columns },
      );
    },

    async store(ctx) {
      const { document: index, rows } = ctx.input;
      // This branch's own parse step (a sibling branch's is never visible here).
      const { name } = ctx.outputOf('parse');
      const written = await writeDocumentRows(
        { taskId: ctx.taskId, document: index, name, rows },
        ctx.signal,
      );
      return complete({ document: index, name, rows: rows.length, ...written });
    },

    async report(ctx) {
      const branches = ctx.input.outputs;
      const persisted = await countTaskRows(ctx.taskId, ctx.signal);
      const documents = branches.map((b) => ({
        name: b.name,
        rows: b.rows,
        inserted: b.inserted,
        persisted: persisted.get(b.document) ?? 0,
      }));
      const missing = documents.filter((d) => d.persisted !== d.rows);
      if (missing.length > 0) {
        // Written, acknowledged, and not there: the storage is not what the steps believe it is.
        throw new Error(
          `rows missing from ${SAMPLE_TABLE}: ${missing.map((d) => `${d.name} has ${d.persisted} of ${d.rows}`).join(', ')}`,
        );
      }
      return complete({
        table: SAMPLE_TABLE,
        documents,
        totalRows: documents.reduce((sum, d) => sum + d.rows, 0),
      });
    },
  },
});
