// `node --import ./tests/register.mjs --test tests/`: the SDK's tests on plain Node.
import { register } from 'node:module';

register('./stub-hooks.mjs', import.meta.url);
