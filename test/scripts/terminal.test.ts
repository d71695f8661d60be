/**
 * What `npm start` and `npm run demo` print of the servers they use: never a credential.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { redactNatsUrl, redactUrl } from '../../scripts/lib/terminal.js';

test('redactNatsUrl hides a user and password, or a token, of each server', () => {
  assert.equal(redactNatsUrl('nats://127.0.0.1:4222'), 'nats://127.0.0.1:4222');
  assert.equal(redactNatsUrl('nats://sluice:s3cret@nats:4222'), 'nats://***@nats:4222');
  assert.equal(redactNatsUrl('nats://t0ken-s3cret@nats:4222'), 'nats://***@nats:4222');
  assert.equal(
    redactNatsUrl('nats://u:p1@a:4222, tls://u:p2@b:4222'),
    'nats://***@a:4222,tls://***@b:4222',
  );
  assert.equal(redactNatsUrl('a b://u:p3@x'), 'a b://***@x');
});

test('redactUrl hides the password of a database URL', () => {
  assert.equal(
    redactUrl('postgres://sluice:s3cret@postgres:5432/sluice'),
    'postgres://sluice:***@postgres:5432/sluice',
  );
});
