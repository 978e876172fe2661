"""sglang-repro config: the project's effective configuration, each value with where it came from."""

from __future__ import annotations

import argparse
import json
import os

from harness.util.paths import builtin_fixtures, default_cache_dir
from harness.util.project_config import ENV, project

DESCRIPTION = ("Print the project's effective configuration: each key's value and where it came from (the "
               "configuration file and line, an environment variable, or the default). The project is the first "
               "folder from here up holding sglang-repro.toml or a pyproject.toml with [tool.sglang-repro], else "
               "this folder. Checks the file and the project's signature files too: a bad key or value is one "
               "line, exit 2.")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--format", choices=("text", "json"), default="text",
                        help="text (TOML-like lines with their source as a comment; default) or json")


def main(args: argparse.Namespace) -> int:
    from harness.signatures.catalogue import Catalogue
    from harness.store.url import default_store, redact_url

    config = project()
    catalogue = Catalogue.load()  # the project's signature files validated and merged, as every command reads them
    store_source = config.sources["store"] if config.store else "default: results.db in the reports folder"
    rows: list[tuple[str, object, str]] = [
        ("project", str(config.root), str(config.file) if config.file else "no configuration file: this folder"),
        ("scenarios", [str(p) for p in config.scenarios],
         config.sources["scenarios"] if config.scenarios_set else "default (any folder named scenarios)"),
        ("reports", str(config.reports), config.sources["reports"]),
        ("store", redact_url(default_store()), store_source),
        ("baselines", str(config.baselines), config.sources["baselines"]),
        ("fixtures", [*map(str, config.fixtures), str(builtin_fixtures())],
         f"{config.sources['fixtures']}, then the built-in fixtures"),
        ("signatures", [str(p) for p in catalogue.sources],
         f"the built-in catalogue, then {config.sources['signatures']} ({len(catalogue)} signatures in all)"),
        ("cache", str(default_cache_dir()),
         "$SGLANG_REPRO_CACHE" if os.environ.get("SGLANG_REPRO_CACHE") else "default: the user's cache directory"),
    ]
    if args.format == "json":
        print(json.dumps({key: {"value": value, "source": source} for key, value, source in rows}, indent=2))
        return 0
    width = max(len(key) for key, _, _ in rows)
    for key, value, source in rows:
        print(f"{key:<{width}} = {json.dumps(value)}  # {source}")
    overridable = ", ".join(f"{key} ${env}" for key, env in ENV.items())
    print(f"# the environment overrides the file ({overridable}); a command's own option overrides both")
    return 0

