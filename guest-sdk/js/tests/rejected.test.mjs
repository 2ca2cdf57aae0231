// What a tool error says of a rejected effect: a sentence, not escaped JSON; the
// downstream's whole answer stays in the details.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { readable } from '../justonce.js';

test('an answer with a message reads as a sentence', () => {
  assert.equal(
    readable({ error: 'invalid_recipient', message: '`x` is not an email address' }),
    'invalid_recipient: `x` is not an email address',
  );
  assert.equal(readable({ code: -32602, message: 'no such tool' }), '-32602: no such tool');
});

test('another answer is its JSON, a string itself', () => {
  assert.equal(readable({ reason: 'declined' }), '{"reason":"declined"}');
  assert.equal(readable('card declined'), 'card declined');
});
