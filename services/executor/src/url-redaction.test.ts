import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { SECRET_QUERY_PARAMS } from '@sluice/telemetry';
import { redactQuery, redactUrl } from './url-redaction.js';

describe('redactQuery', () => {
  it('redacts every name of the list the logger scrubs too, in any case', () => {
    assert.ok(SECRET_QUERY_PARAMS.has('api_key') && SECRET_QUERY_PARAMS.has('x-api-key'));
    for (const name of SECRET_QUERY_PARAMS) {
      for (const spelled of [name, name.toUpperCase()]) {
        assert.equal(
          redactQuery(`?q=x&${spelled}=SECRET&page=2`),
          `?q=x&${spelled}=REDACTED&page=2`,
          spelled,
        );
      }
    }
  });

  it('keeps the other parameters as they were written', () => {
    assert.equal(redactQuery('?keyword=tokens&q=a%20b&flag'), '?keyword=tokens&q=a%20b&flag');
    assert.equal(redactQuery(''), '');
  });
});

describe('redactUrl', () => {
  it('redacts the password and the secret parameters', () => {
    assert.equal(
      redactUrl('https://user:pw@tool.example/a?refresh-token=SECRET&q=1'),
      'https://user:REDACTED@tool.example/a?refresh-token=REDACTED&q=1',
    );
  });
});
