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

test('an optional property says it may be null or left out, and the tool sees both as left out', () => {
  const refund = tool({
    name: 'refund',
    description: 'Refunds.',
    args: s.object({
      order: s.integer().bigint(),
      note: s.string().describe('Why.').optional(),
      shipping: s.object({ street: s.string() }).optional(),
      currency: s.string().default('EUR'),
    }),
    call: (args) => ({
      note: args.note === undefined ? 'left out' : args.note,
      shipping: 'shipping' in args ? args.shipping : 'left out',
      currency: args.currency,
    }),
  });
  const schema = JSON.parse(refund.describe().inputSchema);
  assert.deepEqual(schema.required, ['order']);
  assert.deepEqual(schema.properties.note, {
    anyOf: [{ type: 'string' }, { type: 'null' }],
    description: 'Why.',
  });
  assert.deepEqual(schema.properties.shipping.anyOf[1], { type: 'null' });
  assert.equal(schema.properties.shipping.anyOf[0].type, 'object');
  // The opposite: a defaulted property is not nullable (a null there is "not given").
  assert.deepEqual(schema.properties.currency, { type: 'string', default: 'EUR' });
  // An optional integer keeps its own keywords, so `.bigint()` still applies.
  assert.deepEqual(schema.properties.order, { type: 'integer' });

  const leftOut = refund.call('{"order": 1}');
  const nulls = refund.call('{"order": 1, "note": null, "shipping": null, "currency": null}');
  assert.equal(nulls, leftOut);
  assert.deepEqual(JSON.parse(leftOut), { note: 'left out', shipping: 'left out', currency: 'EUR' });
  assert.equal(JSON.parse(refund.call('{"order": 1, "note": "late"}')).note, 'late');
});

test('an output schema travels in the schema root, and a rich result hands its parts over', async () => {
  const { OUTPUT_SCHEMA_KEYWORD, content, rich } = await import('../justonce.js');
  const output = s.object({ points: s.integer() });
  const chart = tool({
    name: 'chart',
    description: 'Charts.',
    args,
    output,
    call: () => rich([content.text('chart:'), content.image([1, 2], 'image/png')], { points: 2 }),
  });
  assert.deepEqual(JSON.parse(chart.describe().inputSchema)[OUTPUT_SCHEMA_KEYWORD], output.json);
  globalThis.addedContent = [];
  assert.equal(chart.call('{"account":"a"}'), '{"points":2}');
  assert.deepEqual(globalThis.addedContent, [
    { tag: 'text', val: 'chart:' },
    { tag: 'image', val: { data: Uint8Array.from([1, 2]), mimeType: 'image/png' } },
  ]);
  assert.throws(() => tool({ name: 'x', description: 'X.', args, output: s.string(), call: () => 0 }));
});

test('a 64-bit id takes its digits as a string too, and the tool sees a BigInt', () => {
  const refund = tool({
    name: 'refund',
    description: 'Refunds.',
    args: s.object({ order: s.uint64(), delta: s.int64(), qty: s.integer() }),
    call: (args) => ({ order: typeof args.order, delta: typeof args.delta, qty: typeof args.qty }),
  });
  const schema = JSON.parse(refund.describe().inputSchema);
  assert.deepEqual(schema.properties.order.type, ['integer', 'string']);
  assert.equal(schema.properties.order.format, 'uint64');
  assert.equal(schema.properties.delta.format, 'int64');
  assert.equal(schema.properties.qty.type, 'integer', 'a plain integer takes no string');
});
