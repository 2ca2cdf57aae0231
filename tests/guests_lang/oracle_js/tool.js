// oracle_js: returns its arguments as the SDK parsed them (tests/tests/lang/oracle.rs).
// Every shape the JavaScript SDK builds: nested objects, optional and defaulted
// properties, enums, arrays of objects, integers past 2^53, numbers, strings.

import { s, tool } from '../../../guest-sdk/js/justonce.js';

const address = s.object({
  street: s.string(),
  unit: s.string().optional(),
  zip: s.integer({ minimum: 0 }).optional(),
});

export const { describe, call } = tool({
  name: 'oracle_js',
  description: 'Returns its arguments as it parsed them.',
  args: s.object({
    id: s.integer({ minimum: 0 }),
    big: s.integer().bigint().default(0),
    delta: s.integer(),
    ratio: s.number(),
    name: s.string(),
    address,
    currency: s.string().default('EUR'),
    note: s.string().optional(),
    level: s.enum(['low', 'high']).default('low'),
    shipping: address.optional(),
    lines: s.array(s.object({ sku: s.string(), qty: s.integer().default(1) })).default([]),
  }),
  call(args) {
    return args;
  },
});
