// What `describe` tells the host, on plain Node (see register.mjs).
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { READ_ONLY_KEYWORD, s, tool } from '../justonce.js';

const args = s.object({ account: s.string() });

test('a read-only tool says so in its schema root and others do not', () => {
  const readOnly = tool({ name: 'balance', description: 'Looks.', args, readOnly: true, call: () => 0 });
  const other = tool({ name: 'refund', description: 'Refunds.', args, call: () => 0 });
  assert.equal(JSON.parse(readOnly.describe().inputSchema)[READ_ONLY_KEYWORD], true);
  assert.equal(READ_ONLY_KEYWORD in JSON.parse(other.describe().inputSchema), false);
  assert.throws(() => tool({ name: 'x', description: 'X.', args, readOnly: 'yes', call: () => 0 }));
});
