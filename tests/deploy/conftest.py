"""pytest options of tests/deploy: the binaries whose --help the checks read.

  scripts/venv-python -m pytest tests/deploy --kcached build/daemon/kcached
"""
import os
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "deploy", "tools"))


def pytest_addoption(parser):
    parser.addoption("--kcached", default=os.environ.get("KCACHED"),
                     help="the kcached binary (or $KCACHED)")


@pytest.fixture(scope="session")
def kcached(request):
    path = request.config.getoption("--kcached")
    if not path:
        pytest.exit("pass --kcached PATH (or set KCACHED) to the kcached binary", returncode=2)
    return os.path.abspath(path)
