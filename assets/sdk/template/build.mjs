// Builds a cowork app: <app folder>/app.js -> <app folder>/app.wasm
//
//   npm install                                  (once, in this folder)
//   node build.mjs                               this folder's app.js, world "app"
//   node build.mjs app-with-ai                   ... for another world
//   node build.mjs app-with-ai ../examples/standup   another folder's app.js
//
// Run it from here: an ES module finds its packages from where the script
// file is (NODE_PATH does not apply), so this script must sit next to the
// node_modules that `npm install` made. The WIT is ../wit next to this file.

import { componentize } from '@bytecodealliance/componentize-js';
import { writeFile } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const WORLDS = ['app', 'app-with-ai', 'app-with-http', 'app-with-ai-and-http'];

const here = dirname(fileURLToPath(import.meta.url));
const worldName = process.argv[2] ?? 'app';
const appDir = resolve(process.argv[3] ?? here);

if (!WORLDS.includes(worldName)) {
  console.error(`unknown world "${worldName}": use one of ${WORLDS.join(', ')}`);
  process.exit(2);
}

const sourcePath = resolve(appDir, 'app.js');
const witPath = resolve(here, '..', 'wit');
const out = resolve(appDir, 'app.wasm');

const { component } = await componentize({
  sourcePath,
  witPath,
  worldName,
  // No WASI at all: a cowork app has no console, clock, random or fetch of
  // its own, only the interfaces of its world.
  disableFeatures: ['stdio', 'random', 'clocks', 'http', 'fetch-event'],
});

await writeFile(out, component);
console.log(`${out}: ${(component.length / 1024 / 1024).toFixed(1)} MiB, world ${worldName}`);
