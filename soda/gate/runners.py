"""Which test runner a test command runs, how soda asks it for its own per-test
report, and how it runs one test.

soda reads the command, never a setting written by hand: `go test` (test2json
events), `cargo test` (libtest's output), `cargo nextest run` (its JUnit
report), vitest, jest, mocha, `node --test`, and
`npm test`/`yarn test`/`pnpm test` by the runner its `test` script names (in the
person's package.json). At run time soda adds what makes the runner write its
report into a directory outside the checkout (`Invocation`), as it does for
pytest (see `soda.gate.runner`), so the change under test never writes the
file the gate reads:

    go       -json is added after `go test` when missing; stdout is the report
    cargo    --no-fail-fast is added (cargo stops at the first failing target
             otherwise); stdout and stderr together are the report
    nextest  --no-fail-fast, and a tool config file (--tool-config-file) that
             gives the profile the command runs (default unless --profile says)
             a JUnit report at FILE; a junit path the repository's own
             .config/nextest.toml sets for that profile takes precedence, and
             the run is then refused for want of soda's report
    vitest   --reporter=default --reporter=json --outputFile.json=FILE (and,
             from vitest 3, --configLoader=runner: vite bundles a TypeScript
             config into node_modules/.vite-temp, which the jail binds read-only)
    jest     --json --outputFile=FILE
    mocha    --reporter=json --reporter-option output=FILE
    node     NODE_OPTIONS with soda's reporter (`reports.NODE_REPORTER`)
             besides the spec reporter: node's junit names no file

`selected` narrows a command to one test the way each runner does it.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from soda.gate import libtest, reports
from soda.gate.reports import Parsed

EXAMPLES = {
    "pytest": "tests/test_x.py::test_name",
    "go": "example.com/mod/pkg/TestName",
    "cargo": "crate/src/lib.rs::tests::name",
    "nextest": "crate::tests::name",
    "vitest": "test/x.test.ts::describe > test",
    "jest": "test/x.test.js::describe > test",
    "mocha": "test/x.js::suite test",
    "node": "test/x.test.js::describe > test",
}
"""A test id as each runner's report names it (the selector `selected` takes)."""

KINDS = ("pytest", "go", "cargo", "nextest", "vitest", "jest", "mocha", "node")
"""The runners soda reads on its own (besides `gate.junit` and the exit code)."""

LABELS = {
    "pytest": "pytest's JUnit XML",
    "go": "go test -json (test2json events)",
    "cargo": "cargo test's libtest output (--no-fail-fast)",
    "nextest": "cargo nextest's JUnit report (--no-fail-fast)",
    "vitest": "vitest's json reporter",
    "jest": "jest's --json report",
    "mocha": "mocha's json reporter",
    "node": "node --test through soda's reporter",
}

_WORD = r"(?:^|[\s/;&|(])"
_END = r"(?=$|[\s;&|)])"
_PATTERNS = {
    "pytest": re.compile(rf"{_WORD}(?:py\.test|pytest){_END}"),
    "go": re.compile(rf"{_WORD}go\s+test{_END}"),
    "cargo": re.compile(rf"{_WORD}cargo\s+test{_END}"),
    "nextest": re.compile(rf"{_WORD}cargo\s+nextest\s+run{_END}"),
    "vitest": re.compile(rf"{_WORD}vitest{_END}"),
    "jest": re.compile(rf"{_WORD}jest{_END}"),
    "mocha": re.compile(rf"{_WORD}mocha{_END}"),
    "node": re.compile(rf"{_WORD}node\s+(?:\S+\s+)*?--test{_END}"),
}
_PACKAGE_TEST = re.compile(r"^\s*(npm|yarn|pnpm)(\s+run)?\s+test(\s+--(\s.*)?)?\s*$")


def kind_of(command: str, root: Path) -> str | None:
    """The runner `command` runs (one of KINDS), or None. `npm test` and its kin
    are read through the `test` script of `root`'s package.json."""
    if _PACKAGE_TEST.match(command):
        script = package_test_script(root)
        found = kind_of(script, root) if script and not _PACKAGE_TEST.match(script) else None
        return found if found in ("vitest", "jest", "mocha", "node") else None
    for kind, pattern in _PATTERNS.items():
        if pattern.search(command):
            return kind
    return None


def package_test_script(root: Path) -> str | None:
    try:
        data = json.loads((root / "package.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    scripts = data.get("scripts") if isinstance(data, dict) else None
    test = scripts.get("test") if isinstance(scripts, dict) else None
    return test if isinstance(test, str) else None


@dataclass(frozen=True)
class Invocation:
    """The command as soda runs it, and where its report lands."""

    command: str
    report: Path
    env: dict[str, str] = field(default_factory=dict)


def invocation(kind: str, command: str, reports_dir: Path, root: Path) -> Invocation:
    """`command` with what makes `kind` write its report into `reports_dir` (a
    directory outside the checkout, writable in the jail). Not for pytest."""
    out = reports_dir / "report"
    quoted = shlex.quote(str(out))
    if kind == "go":
        if not re.search(r"(^|\s)-json(\s|$)", command):
            command = _PATTERNS["go"].sub(lambda m: f"{m.group(0)} -json", command, count=1)
        return Invocation(f"{{ {command}\n}} > {quoted}", out)
    if kind == "cargo":
        if "--no-fail-fast" not in command:
            command = _PATTERNS["cargo"].sub(
                lambda m: f"{m.group(0)} --no-fail-fast", command, count=1
            )
        return Invocation(f"{{ {command}\n}} > {quoted} 2>&1", out)
    if kind == "nextest":
        return _nextest(command, reports_dir, out)
    if kind == "node":
        reporter = reports_dir / "soda_reporter.mjs"
        reporter.write_text(reports.NODE_REPORTER, encoding="utf-8")
        options = (
            "--test-reporter=spec --test-reporter-destination=stdout "
            f"--test-reporter={reporter} --test-reporter-destination={out}"
        )
        return Invocation(command, out, {"NODE_OPTIONS": options})
    args = {
        "vitest": ["--reporter=default", "--reporter=json", f"--outputFile.json={out}"]
        + (["--configLoader=runner"] if _major(root, "vitest") >= 3 else []),
        "jest": ["--json", f"--outputFile={out}"],
        "mocha": ["--reporter=json", "--reporter-option", f"output={out}"],
    }[kind]
    return Invocation(_append(command, args), out)


_NEXTEST_PROFILE = re.compile(r"(?:^|\s)(?:--profile|-P)(?:=|\s+)([^\s;&|]+)")


def _nextest(command: str, reports_dir: Path, out: Path) -> Invocation:
    """nextest writes JUnit only where a profile's config says: soda's own tool
    config file names `out` for the profile the command runs."""
    found = _NEXTEST_PROFILE.search(command)
    profile = found.group(1) if found else "default"
    config = reports_dir / "nextest.toml"
    config.write_text(
        f"[profile.{json.dumps(profile)}.junit]\npath = {json.dumps(str(out))}\n",
        encoding="utf-8",
    )
    args = ["--tool-config-file", f"soda:{config}"]
    if "--no-fail-fast" not in command:
        args.append("--no-fail-fast")
    words = shlex.join(args)
    return Invocation(
        _PATTERNS["nextest"].sub(lambda m: f"{m.group(0)} {words}", command, count=1), out
    )


def _append(command: str, args: list[str]) -> str:
    """`command` with `args` at its end; after `--` for `npm test` and its kin
    (what follows it goes to the test script)."""
    command = command.rstrip()
    if _PACKAGE_TEST.match(command) and not re.search(r"\s--(\s|$)", command):
        command += " --"
    return f"{command} {shlex.join(args)}"


def _major(root: Path, package: str) -> int:
    """The major version of `package` in the person's node_modules (0 if unknown)."""
    try:
        data = json.loads((root / "node_modules" / package / "package.json").read_text("utf-8"))
        return int(str(data.get("version", "0")).split(".")[0])
    except (OSError, ValueError, AttributeError):
        return 0


def parse(kind: str, report: Path, root: Path) -> Parsed | str:
    """The per-test results in `report`, ids relative to `root` (where the
    checkout appears to the tests)."""
    if kind == "go":
        return reports.parse_go(report)
    if kind == "cargo":
        return libtest.parse_libtest(report)
    if kind == "nextest":  # ids: binary id::test name (classname::name)
        return reports.parse_junit(report)
    if kind in ("vitest", "jest"):
        return reports.parse_jest_json(report, root)
    if kind == "mocha":
        return reports.parse_mocha_json(report, root)
    if kind == "node":
        return reports.parse_node_lines(report, root)
    raise ValueError(f"no parser for {kind!r}")


def output_of(kind: str, report: Path, output: str, limit: int) -> str:
    """What the run printed: for go and cargo the report file is where their
    stdout went, so its end is added to what the command printed besides."""
    if kind not in ("go", "cargo") or not report.is_file():
        return output
    text = report.read_text(encoding="utf-8", errors="replace")
    if kind == "go":  # the test2json events' own output lines
        lines = [str(e.get("Output", "")) for e in map(reports._json_line, text.splitlines()) if e]
        text = "".join(lines) or text
    return (output + ("\n" if output else "") + text[-limit:]).strip()


# --- one test ------------------------------------------------------------------------

_GO_TEST = re.compile(r"^(.*?)/((?:Test|Example|Fuzz|Benchmark)[^/]*)(/.*)?$")


def selected(kind: str | None, command: str, selector: str) -> str | None:
    """`command` narrowed to `selector` (a test id as the report names it, or a
    test file) the way `kind` runs one test; None when this module has no rule
    for `kind` (the caller appends the selector)."""
    if kind == "go":
        match = _GO_TEST.match(selector)
        if match is None:  # a package: ./pkg or example.com/m/pkg
            return _replace_packages(command, selector)
        package, test, sub = match.groups()
        pattern = f"^{re.escape(test)}$" + "".join(
            f"/^{re.escape(part)}$" for part in (sub or "").split("/")[1:]
        )
        return f"{_replace_packages(command, package)} -run {shlex.quote(pattern)}"
    if kind == "cargo":
        name = selector.split("::", 1)[1] if "::" in selector else selector
        name = name.removesuffix(" (package)")
        words = command.rstrip()
        exact = " -- --exact" if "::" in selector and "/doctest::" not in selector else ""
        return f"{words} {shlex.quote(name)}{exact}"
    if kind == "nextest":
        return _PATTERNS["nextest"].sub(
            lambda m: f"{m.group(0)} -E {shlex.quote(_nextest_filter(selector))}", command, count=1
        )
    if kind in ("vitest", "jest", "mocha", "node"):
        file, _, title = selector.partition("::")
        args = [file] if file else []
        if title and title != "(file)":
            flag = {"vitest": "-t", "jest": "-t", "mocha": "--grep"}.get(kind)
            pattern = _js_pattern(kind, title)
            args += [flag, pattern] if flag else [f"--test-name-pattern={pattern}"]
        if kind == "node":  # node's options go before its files
            return _PATTERNS["node"].sub(
                lambda m: f"{m.group(0)} {shlex.join(args)}", command, count=1
            )
        return _append(command, args)
    return None


def _nextest_filter(selector: str) -> str:
    """A filterset for one test id (`binary id::test name`; a binary id has
    `::` of its own for an integration test, so each split is offered), or
    for a test name alone."""
    parts = selector.split("::")
    if len(parts) == 1:
        return f"test({selector})"
    splits = (
        f"(binary_id(={'::'.join(parts[:at])}) & test(={'::'.join(parts[at:])}))"
        for at in range(1, len(parts))
    )
    return " | ".join(splits)


def _js_pattern(kind: str, title: str) -> str:
    """A pattern for the test's title: vitest and jest match the describe blocks
    and the title joined by spaces, node and mocha the test's own title."""
    parts = title.split(" > ")
    if kind in ("vitest", "jest"):
        return "^" + re.escape(" ".join(parts)) + "$"
    return re.escape(parts[-1])


def _replace_packages(command: str, packages: str) -> str:
    """A go test command with its package patterns (./...) replaced by `packages`."""
    words = shlex.split(command)
    kept = [w for w in words if not (w.startswith("./") or w == "...")]
    return shlex.join([*kept, packages])
