import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { SluiceError, SluiceErrorCode, isSluiceError } from './errors.js';

describe('isSluiceError', () => {
  it('knows a SluiceError by its shape, also one made by another copy of the module', () => {
    assert.equal(isSluiceError(new SluiceError('not_found', 'gone')), true);
    const copy = Object.assign(new Error('gone'), { name: 'SluiceError', code: 'not_found' });
    assert.equal(isSluiceError(copy), true);
    assert.equal(isSluiceError(new Error('plain')), false);
    assert.equal(isSluiceError({ name: 'SluiceError', code: 'not_found' }), false);
    assert.equal(isSluiceError(Object.assign(new Error('x'), { name: 'SluiceError' })), false);
  });

  it('with a code, holds only for that code', () => {
    const exists = new SluiceError('already_exists', 'key used for another request');
    assert.equal(isSluiceError(exists, SluiceErrorCode.AlreadyExists), true);
    assert.equal(isSluiceError(exists, SluiceErrorCode.NotFound), false);
    assert.equal(isSluiceError(new Error('plain'), SluiceErrorCode.AlreadyExists), false);
  });
});
