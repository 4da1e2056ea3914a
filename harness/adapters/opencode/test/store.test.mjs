// Tests of the store set-up in lib/opencode.mjs: the config seed copied into a new store (with its dotfiles and nesting).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, writeFileSync, readFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { isolatedEnv, seedConfig, seedDir } from '../lib/opencode.mjs';
import { tempDir } from './helpers.mjs';

test('the config seed is copied whole into a new store, once, and a missing seed says so', () => {
  const cache = tempDir('seed-cache');
  const env = { HOME: cache, XDG_CACHE_HOME: cache };
  const store = tempDir('seed-store');
  const isolated = isolatedEnv(store, env);
  assert.equal(seedConfig(env, isolated), false, 'no seed yet');
  const seed = seedDir(env);
  mkdirSync(join(seed, 'node_modules', '@opencode-ai', 'plugin', 'dist'), { recursive: true });
  writeFileSync(join(seed, 'node_modules', '@opencode-ai', 'plugin', 'package.json'), '{"version":"1.18.33"}');
  writeFileSync(join(seed, 'node_modules', '@opencode-ai', 'plugin', 'dist', 'index.js'), 'export {}');
  writeFileSync(join(seed, 'package.json'), '{}');
  writeFileSync(join(seed, '.gitignore'), 'node_modules\n');
  assert.equal(seedConfig(env, isolated), true);
  const target = join(isolated.XDG_CONFIG_HOME, 'opencode');
  assert.equal(readFileSync(join(target, 'node_modules', '@opencode-ai', 'plugin', 'dist', 'index.js'), 'utf8'), 'export {}');
  assert.ok(existsSync(join(target, '.gitignore')));
  assert.ok(existsSync(join(target, 'package.json')));
  writeFileSync(join(target, 'package.json'), '{"changed":true}');
  assert.equal(seedConfig(env, isolated), true, 'an already seeded store is left alone');
  assert.equal(readFileSync(join(target, 'package.json'), 'utf8'), '{"changed":true}');
  assert.equal(readFileSync(join(seed, 'package.json'), 'utf8'), '{}', 'the seed itself is not touched');
});
