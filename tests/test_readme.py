"""The README's two commands are the product's front door: keep CI honest about them."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return re.findall(r"```bash\n(.+?)\n```", text, flags=re.S)


def test_readme_opens_with_two_commands():
    commands = _readme_commands()
    assert len(commands) >= 2
    assert "snakemake" in commands[0] and "all" in commands[0]
    assert "pytest" in commands[1]
    for command in commands[:2]:
        assert "torch==2.13.0" in command, "the CPU torch pin keeps installs small"


def test_ci_runs_the_readme_test_command_verbatim():
    ci_lines = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert _readme_commands()[1] in ci_lines
