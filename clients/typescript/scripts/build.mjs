// Builds dist/esm (ES modules, type-checked, with .d.ts files) and dist/cjs (CommonJS: the same
// sources transpiled file by file, with the same .d.ts files), with the TypeScript compiler of
// devDependencies. Run by `npm run build` and by `npm pack` (prepack). One type check, not two:
// on a busy CI machine the second full check cost as long as the first.
import { execFileSync } from "node:child_process";
import { copyFileSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";

const require = createRequire(import.meta.url);
const ts = require("typescript");
const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const src = join(root, "src");
const esm = join(root, "dist", "esm");
const cjs = join(root, "dist", "cjs");

rmSync(join(root, "dist"), { recursive: true, force: true });
execFileSync(process.execPath, [require.resolve("typescript/bin/tsc"), "-p", join(root, "tsconfig.json")], {
  cwd: root,
  stdio: "inherit",
});

function* sources(directory) {
  for (const entry of readdirSync(directory, { withFileTypes: true })) {
    const path = join(directory, entry.name);
    if (entry.isDirectory()) yield* sources(path);
    else if (entry.name.endsWith(".ts")) yield path;
  }
}

for (const file of sources(src)) {
  const name = relative(src, file).replace(/\.ts$/, "");
  const output = ts.transpileModule(readFileSync(file, "utf8"), {
    compilerOptions: { module: ts.ModuleKind.CommonJS, target: ts.ScriptTarget.ES2022, esModuleInterop: true },
    fileName: file,
  });
  mkdirSync(dirname(join(cjs, name)), { recursive: true });
  writeFileSync(join(cjs, `${name}.js`), output.outputText);
  copyFileSync(join(esm, `${name}.d.ts`), join(cjs, `${name}.d.ts`));
}
// The package is "type": "module"; this marks the CommonJS build as such for Node and bundlers.
writeFileSync(join(cjs, "package.json"), JSON.stringify({ type: "commonjs" }) + "\n");
