import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ZodError } from 'zod';
import { MAX_ROWS, parseCsv, parseDocument } from './document-formats.js';

describe('parseCsv', () => {
  it('reads quoted fields, escaped quotes, embedded line breaks and CRLF', () => {
    const text = '\uFEFFname,note\r\n"Smith, J","said ""hi"""\r\n"multi\nline",\n\nlast,x';
    assert.deepEqual(parseCsv(text), {
      records: [
        ['name', 'note'],
        ['Smith, J', 'said "hi"'],
        ['multi\nline', ''],
        ['last', 'x'],
      ],
    });
  });

  it('names the line of a malformed record', () => {
    assert.deepEqual(parseCsv('a,b\n1,"open'), { problem: 'line 2: a quoted field is not closed' });
    assert.deepEqual(parseCsv('a\n"x"y'), { problem: 'line 2: text after a closing quote' });
    assert.deepEqual(parseCsv('a\nx"y'), { problem: 'line 2: a quote inside an unquoted field' });
  });
});

describe('parseDocument', () => {
  it('turns CSV into rows keyed by the header', () => {
    assert.deepEqual(parseDocument('csv', 'id, city\n1,Oslo\n2,"Lima"\n'), {
      columns: ['id', 'city'],
      rows: [
        { id: '1', city: 'Oslo' },
        { id: '2', city: 'Lima' },
      ],
    });
  });

  it('turns JSON (an array of flat objects, or one) into rows', () => {
    assert.deepEqual(parseDocument('json', '[{"a":1,"b":"x"},{"a":2,"c":null}]'), {
      columns: ['a', 'b', 'c'],
      rows: [
        { a: 1, b: 'x' },
        { a: 2, c: null },
      ],
    });
    assert.deepEqual(parseDocument('json', '{"only":true}').rows, [{ only: true }]);
  });

  it('turns text into one row per non-empty line', () => {
    assert.deepEqual(parseDocument('text', 'first line\n\n  second  one here \n').rows, [
      { line: 1, text: 'first line', words: 2 },
      { line: 3, text: 'second  one here', words: 3 },
    ]);
  });

  it('refuses malformed documents with a ZodError saying why', () => {
    const cases: Array<[Parameters<typeof parseDocument>[0], string, RegExp]> = [
      ['csv', 'a,b\n1', /record 1 has 1 fields; the header has 2/],
      ['csv', '', /without a header row/],
      ['csv', 'a,a\n1,2', /unique and not empty/],
      ['csv', 'a\n"x', /not CSV: line 2/],
      ['json', '{"a":', /not JSON/],
      ['json', '[1, 2]', /expected record|Invalid input/i],
      ['json', '[{"nested":{"x":1}}]', /Invalid input/i],
    ];
    for (const [format, text, message] of cases) {
      assert.throws(
        () => parseDocument(format, text),
        (error: unknown) => error instanceof ZodError && message.test(error.message),
        `${format}: ${text}`,
      );
    }
  });

  it('refuses more rows than the limit', () => {
    const lines = Array.from({ length: MAX_ROWS + 1 }, (_, i) => `line ${i}`).join('\n');
    assert.throws(() => parseDocument('text', lines), /at most 1000 rows/);
    assert.equal(
      parseDocument('text', lines.split('\n').slice(1).join('\n')).rows.length,
      MAX_ROWS,
    );
  });
});
