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


def test_ci_runs_both_readme_commands_verbatim_each_in_a_new_virtual_environment():
    ci_lines = [line.strip() for line in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()]
    study, tests = _readme_commands()[:2]
    assert study in ci_lines, "CI must run the README's study command as written"
    assert tests in ci_lines, "CI must run the README's test command as written"
    i_study, i_tests = ci_lines.index(study), ci_lines.index(tests)
    assert i_study < i_tests, "the study runs first, on a plain install"
    # each command runs right after creating and activating its own virtual environment
    for start, end in ((0, i_study), (i_study, i_tests)):
        between = ci_lines[start:end]
        assert any(line.startswith("python3 -m venv ") for line in between)
        assert any(line.startswith("source ") and line.endswith('/bin/activate"') for line in between)
    assert "[test]" not in study, "the study command installs no test extras"
    assert any("reports/report.html" in line for line in ci_lines[i_study:i_tests]), \
        "CI checks that the study ends with the HTML report"


def test_ci_makes_the_documented_swap_to_xgboosts_cuda_build_after_the_plain_installs():
    """docs/install.md's swap (xgboost-cpu -> the CUDA build) is typed by CI as written, after
    the tests' install, and followed by a check that the CUDA build is the one imported."""
    text = (ROOT / "docs" / "install.md").read_text(encoding="utf-8")
    section = text.split("## XGBoost on a GPU", 1)[1].split("\n## ", 1)[0]
    swap = next(line for block in re.findall(r"```bash\n(.+?)\n```", section, flags=re.S)
                for line in block.splitlines() if "xgboost-cpu" in line)
    ci_lines = [line.strip() for line in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()]
    assert swap in ci_lines, "CI must make docs/install.md's swap as written"
    tests = _readme_commands()[1]
    after = ci_lines[ci_lines.index(swap):]
    assert ci_lines.index(tests) < ci_lines.index(swap)
    assert any("USE_CUDA" in line for line in after) and any("test_gbdt.py" in line for line in after)
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert "\"xgboost-cpu>=2.1; platform_system == 'Linux' or platform_system == 'Windows'\"" in pyproject
