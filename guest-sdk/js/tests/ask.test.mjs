// `ask` on plain Node, the host's `input.ask` scripted (see stub-hooks.mjs): what
// goes to the host and what the tool gets back.
import assert from 'node:assert/strict';
import { beforeEach, test } from 'node:test';

import { Answer, EffectError, ask, askAll } from '../justonce.js';

const CONFIRM = {
  type: 'object',
  properties: { confirm: { type: 'boolean' } },
  required: ['confirm'],
};

let asked;
let answers;
beforeEach(() => {
  asked = [];
  answers = {};
  globalThis.scriptedAsk = (questions) => {
    asked.push(questions);
    return questions.map((q) => JSON.stringify(answers[q.name]));
  };
});

test('one question goes to the host and its answer comes back', () => {
  answers.answer = { action: 'accept', content: { confirm: true } };
  const answer = ask('Refund 25.00 EUR?', CONFIRM);
  assert.ok(answer instanceof Answer);
  assert.equal(answer.accepted, true);
  assert.equal(answer.get('confirm'), true);
  assert.equal(asked.length, 1);
  const [[question]] = asked;
  assert.equal(question.name, 'answer');
  assert.equal(question.message, 'Refund 25.00 EUR?');
  assert.deepEqual(JSON.parse(question.schema), CONFIRM);
});

test('several questions are one ask and their answers come in order', () => {
  answers.card = { action: 'accept', content: { last4: '4242' } };
  answers.confirm = { action: 'decline' };
  const [card, confirm] = askAll([
    { name: 'card', message: 'Which card?', schema: { type: 'object' } },
    { name: 'confirm', message: 'Sure?', schema: CONFIRM },
  ]);
  assert.equal(asked.length, 1, 'one ask for both');
  assert.equal(card.get('last4'), '4242');
  assert.equal(confirm.accepted, false);
  assert.equal(confirm.get('confirm'), undefined);
  assert.equal(confirm.get('confirm', false), false);
});

test('a refusal is an effect error the agent is told', () => {
  globalThis.scriptedAsk = () => {
    throw { payload: { tag: 'denied', val: 'question names must be unique' } };
  };
  assert.throws(
    () => ask('Sure?', CONFIRM),
    (e) => e instanceof EffectError && e.toToolError().code === 'effect_denied',
  );
});
